//! `xlane fd keygen` and `xlane fd run --key-file` as users meet them: the
//! generated file is a valid key file with fresh keys, and a bad file or a
//! key id it lacks gets a clear error naming the problem before anything
//! runs. (Forged and replayed heartbeats against authenticated runners:
//! `cargo test -p xlane-fd --test forged`.)

use std::process::Command;

fn xlane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xlane"))
}

#[test]
fn keygen_writes_fresh_keys_and_bad_key_files_are_refused_clearly() {
    let gen = |ids: &str| {
        let out = xlane()
            .args(["fd", "keygen", "--id", ids])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let (one, two) = (gen("1,4"), gen("1,4"));
    let ring = xlane_auth::KeyRing::from_toml(&one).expect("a valid key file");
    assert_eq!(ring.ids().collect::<Vec<_>>(), vec![1, 4]);
    assert_ne!(one, two, "keys must be fresh");

    let dir = std::env::temp_dir().join(format!("xlane-fd-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(&good, &one).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[key]]\nid = 1\nsecret = \"abcd\"\n").unwrap();
    let table = dir.join("t.table");
    for (file, extra, says) in [
        (&bad, &[][..], "key[0] (id 1): secret must be 32 hex digits"),
        (
            &good,
            &["--key-id", "9"][..],
            "key 9 is not in the key file",
        ),
        (&dir.join("missing.toml"), &[][..], "missing.toml"),
    ] {
        let out = xlane()
            .args([
                "fd",
                "run",
                "--bind",
                "127.0.0.1:47123",
                "--peer",
                "127.0.0.1:9",
            ])
            .arg("--table")
            .arg(&table)
            .arg("--key-file")
            .arg(file)
            .args(extra)
            .args(["--seconds", "0.2", "--no-mlock"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{file:?} {extra:?} was accepted");
        assert!(stderr.contains(says), "{file:?} {extra:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
