use super::*;

#[test]
fn names() {
    for ok in ["eth0", "veth-a.1", "xl-h1@x", "a"] {
        assert!(valid_iface(ok), "{ok}");
    }
    for bad in [
        "",
        "-x",
        "a b",
        "a/b",
        "..",
        "abcdefghijklmnop",
        "a;b",
        "$(x)",
    ] {
        assert!(!valid_iface(bad), "{bad}");
    }
    for ok in ["xl-run1-h1", "ns.1"] {
        assert!(valid_netns(ok), "{ok}");
    }
    for bad in ["", "-n", "a/b", "..", "a b", "a@b"] {
        assert!(!valid_netns(bad), "{bad}");
    }
}

#[test]
fn skip_reasons_for_errors() {
    let cases = [
        (
            io::Error::from(io::ErrorKind::NotFound),
            SkipReason::NotPresent,
        ),
        (
            io::Error::from(io::ErrorKind::PermissionDenied),
            SkipReason::NotPermitted,
        ),
        (
            io::Error::from_raw_os_error(libc::EIO),
            SkipReason::NotPermitted,
        ),
        (
            io::Error::from_raw_os_error(libc::EINVAL),
            SkipReason::NotPermitted,
        ),
        (
            io::Error::from_raw_os_error(libc::EBADF),
            SkipReason::Failed,
        ),
    ];
    for (e, want) in cases {
        match skip_for_error(&e) {
            MeasureStatus::Skipped { reason, .. } => assert_eq!(reason, want, "{e}"),
            MeasureStatus::Applied => panic!("applied for {e}"),
        }
    }
}
