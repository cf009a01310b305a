//! The preload library under a real program: a small C program (built here
//! with `cc`) that listens, connects, takes the connection with `accept4`,
//! tries to leave the level with `setsockopt`, and makes a `setsockopt`
//! call the kernel refuses. It reports what `getsockopt` reads back from
//! inside.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `target/<profile>/libxlane_preload.so`. Cargo does not rebuild a
/// `cdylib` for its integration tests: build it first (`cargo build -p
/// xlane-preload`; scripts/test.sh does), and this refuses a library older
/// than its source.
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let lib = dir.join("libxlane_preload.so");
    let hint = "build it first: cargo build -p xlane-preload";
    let built = std::fs::metadata(&lib)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("{} missing; {hint}", lib.display()));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let changed = std::fs::metadata(src).unwrap().modified().unwrap();
    assert!(
        built >= changed,
        "{} is older than its source; {hint}",
        lib.display()
    );
    lib
}

/// The probe program, compiled once per test run.
fn probe() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("xlane-preload-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("probe");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probe.c");
        let st = Command::new("cc")
            .arg("-O1")
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .expect("cc (install build-essential)");
        assert!(st.success(), "cc failed");
        out
    })
}

/// The probe preloaded, with these variables set, on a port from
/// `xlane_testports` (free for TCP and UDP: the probe binds both);
/// `ports(p)` gives `XLANE_LEVEL_PORTS` when the probe runs on port `p`.
fn run(v6: bool, env: &[(&str, &str)], ports: impl Fn(u16) -> Option<String>) -> Output {
    let port = xlane_testports::port(v6);
    let mut c = Command::new(probe());
    c.arg(port.to_string()).arg(if v6 { "6" } else { "4" });
    c.env("LD_PRELOAD", library());
    for (k, v) in env {
        c.env(k, v);
    }
    if let Some(list) = ports(port) {
        c.env("XLANE_LEVEL_PORTS", list);
    }
    c.output().unwrap()
}

/// A socket the probe reported: its name, TOS and priority.
type Sock = (String, i32, i32);

/// The probe's lines: name → (tos, prio), and the refused call's rc and
/// errno.
fn parse(o: &Output) -> (Vec<Sock>, (i32, i32)) {
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "probe failed: {text} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.lines().last() == Some("done"), "{text}");
    let mut socks = Vec::new();
    let mut refused = (0, 0);
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            ["refused", rc, e] => refused = (rc.parse().unwrap(), e.parse().unwrap()),
            [name, t, p] => socks.push((name.to_string(), t.parse().unwrap(), p.parse().unwrap())),
            _ => {}
        }
    }
    (socks, refused)
}

const LEVEL2: [(&str, &str); 2] = [("XLANE_LEVEL_TOS", "184"), ("XLANE_LEVEL_PRIORITY", "6")];

#[test]
fn accept4_and_an_override_stay_on_the_level_ipv4_and_ipv6() {
    for v6 in [false, true] {
        let o = run(v6, &LEVEL2, |_| None);
        let (socks, refused) = parse(&o);
        assert_eq!(socks.len(), 4, "{socks:?}");
        for (name, tos, prio) in &socks {
            assert_eq!((*tos, *prio), (184, 6), "v6={v6} {name}");
        }
        // The refused call is the program's own: -1, EINVAL, and it ran on.
        assert_eq!(refused, (-1, libc::EINVAL), "v6={v6}");
    }
}

#[test]
fn without_the_library_the_override_wins() {
    // The control: the same program, no preload, leaves the level as asked.
    let port = xlane_testports::port(false);
    let o = Command::new(probe())
        .args([&port.to_string(), "4"])
        .output()
        .unwrap();
    let (socks, refused) = parse(&o);
    assert!(
        socks.iter().all(|(_, t, p)| (*t, *p) == (0, 0)),
        "{socks:?}"
    );
    assert_eq!(refused, (-1, libc::EINVAL));
}

#[test]
fn a_port_filter_marks_only_listed_ports() {
    let (socks, _) = parse(&run(false, &LEVEL2, |port| Some(port.to_string())));
    assert!(
        socks.iter().all(|(_, t, p)| (*t, *p) == (184, 6)),
        "{socks:?}"
    );
    let (socks, _) = parse(&run(false, &LEVEL2, |port| {
        assert!(port != 2380 && port != 9);
        Some("2380,9".into())
    }));
    assert!(
        socks.iter().all(|(_, t, p)| (*t, *p) == (0, 0)),
        "{socks:?}"
    );
}

#[test]
fn a_bad_configuration_is_reported_once_and_changes_nothing() {
    let bad = [("XLANE_LEVEL_TOS", "300"), ("XLANE_LEVEL_PRIORITY", "6")];
    let o = run(false, &bad, |_| None);
    let (socks, refused) = parse(&o);
    assert!(
        socks.iter().all(|(_, t, p)| (*t, *p) == (0, 0)),
        "{socks:?}"
    );
    assert_eq!(refused, (-1, libc::EINVAL));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("xlane-preload:").count(), 1, "{err}");
    assert!(err.contains("XLANE_LEVEL_TOS"), "{err}");
}

#[test]
fn children_inherit_the_level() {
    // A shell (dynamic) starts the probe: both are preloaded.
    let port = xlane_testports::port(false);
    let script = format!("{} {port} 4", probe().display());
    let mut c = Command::new("/bin/sh");
    c.args(["-c", &script]).env("LD_PRELOAD", library());
    for (k, v) in LEVEL2 {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    let (socks, _) = parse(&o);
    assert!(
        socks.iter().all(|(_, t, p)| (*t, *p) == (184, 6)),
        "{socks:?}"
    );
}
