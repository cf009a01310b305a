//! `xlane kv serve` without `--peer`: a single node (a one-member raft
//! group) whose raft log in `--data` is its append-only file. A clean stop
//! (SIGTERM) and a restart on the same directory keep the data; so does a
//! `kill -9` under `--fsync always` for every acknowledged write.

mod common;

use common::{spawn_until_ready, Conn};
use std::net::SocketAddr;
use std::process::{Child, Command};
use xlane_kv::resp::Reply;

/// A fresh directory under the system's temporary directory, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "xlane-kv-single-{what}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).expect("scratch dir");
        Scratch(p)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts a single node on `dir` and waits for its ready line.
fn start(dir: &std::path::Path, fsync: &str) -> (Child, SocketAddr) {
    let addr = xlane_testports::tcp();
    let (child, _out, line) = spawn_until_ready(
        Command::new(env!("CARGO_BIN_EXE_xlane"))
            .args(["kv", "serve", "--bind", &addr.to_string(), "--data"])
            .arg(dir)
            .args(["--fsync", fsync]),
    );
    assert!(line.contains("\"mode\":\"single\""), "{line}");
    (child, addr)
}

fn sigterm(child: &mut Child) {
    // Only the process this test started, by its PID.
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child's PID.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().expect("wait");
    assert!(status.success(), "clean stop: {status:?}");
}

#[test]
fn sigterm_and_restart_keep_the_data() {
    let dir = Scratch::new("sigterm");
    let (mut child, addr) = start(dir.path(), "everysec");
    let mut c = Conn::open(addr);
    let writes: Vec<Vec<String>> = (0..200)
        .map(|i| vec!["SET".into(), format!("k{i}"), format!("v{i}")])
        .collect();
    let replies = c.try_pipeline(&writes).expect("writes");
    assert!(replies.iter().all(|r| *r == Reply::ok()));
    drop(c);
    sigterm(&mut child);
    let (mut child, addr) = start(dir.path(), "everysec");
    let mut c = Conn::open(addr);
    assert_eq!(c.try_cmd(&["GET", "k199"]), Some(Reply::bulk("v199")));
    assert_eq!(c.try_cmd(&["DBSIZE"]), Some(Reply::Integer(200)));
    drop(c);
    sigterm(&mut child);
}

#[test]
fn kill_9_under_fsync_always_loses_nothing_acknowledged() {
    let dir = Scratch::new("kill9");
    let (mut child, addr) = start(dir.path(), "always");
    let mut c = Conn::open(addr);
    let mut acked = 0;
    for i in 0..300 {
        if c.try_cmd(&["INCR", "n"]) == Some(Reply::Integer(i + 1)) {
            acked = i + 1;
        }
    }
    assert_eq!(acked, 300);
    // Only the process this test started.
    child.kill().expect("kill -9");
    let _ = child.wait();
    let (mut child, addr) = start(dir.path(), "always");
    let mut c = Conn::open(addr);
    assert_eq!(c.try_cmd(&["GET", "n"]), Some(Reply::bulk("300")));
    drop(c);
    sigterm(&mut child);
}

/// `redis-cli --tls` with the given certificate files (none: no client
/// certificate); its output and whether it succeeded.
fn redis_cli_tls(
    port: u16,
    ca: &std::path::Path,
    client: Option<(&std::path::Path, &std::path::Path)>,
    args: &[&str],
) -> (String, bool) {
    let mut cmd = Command::new("redis-cli");
    if !args.contains(&"--no-auth") {
        cmd.args(["--no-auth-warning", "-a", PASSWORD]);
    }
    let args: Vec<&str> = args.iter().copied().filter(|a| *a != "--no-auth").collect();
    cmd.args([
        "--tls",
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "--cacert",
    ])
    .arg(ca);
    if let Some((cert, key)) = client {
        cmd.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    let out = cmd
        .args(&args)
        .output()
        .expect("redis-cli (apt-get install -y redis-tools)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (text.trim().to_string(), out.status.success())
}

/// The TLS test's `--requirepass`.
const PASSWORD: &str = "tls-test-secret";

#[test]
fn tls_port_serves_redis_cli_and_python_and_refuses_the_rest() {
    use std::io::{Read, Write};
    let dir = Scratch::new("tls");
    let d = dir.path();
    common::make_certs(d, "");
    common::make_certs(d, "rogue-");
    let (child, _out, line) = spawn_until_ready(
        Command::new(env!("CARGO_BIN_EXE_xlane"))
            .args(["kv", "serve", "--bind", "127.0.0.1:0", "--tls-port", "0"])
            .args(["--requirepass", PASSWORD, "--metrics", "127.0.0.1:0"])
            .arg("--tls-cert-file")
            .arg(d.join("server.crt"))
            .arg("--tls-key-file")
            .arg(d.join("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(d.join("ca.crt")),
    );
    let _child = common::Children(vec![child]);
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line");
    let plain: SocketAddr = ready["bind"].as_str().unwrap().parse().unwrap();
    let tls: SocketAddr = ready["tls"].as_str().expect("tls address").parse().unwrap();
    let ca = d.join("ca.crt");
    let (cert, key) = (d.join("client.crt"), d.join("client.key"));
    let me = Some((cert.as_path(), key.as_path()));

    // redis-cli with a client certificate of the CA.
    assert_eq!(
        redis_cli_tls(tls.port(), &ca, me, &["SET", "k", "over tls"]),
        ("OK".into(), true)
    );
    assert_eq!(
        redis_cli_tls(tls.port(), &ca, me, &["GET", "k"]).0,
        "over tls"
    );
    let port = redis_cli_tls(tls.port(), &ca, me, &["CONFIG", "GET", "tls-port"]).0;
    assert_eq!(port, format!("tls-port\n{}", tls.port()));
    // The password is asked for over TLS too.
    let (out, _) = redis_cli_tls(tls.port(), &ca, me, &["--no-auth", "GET", "k"]);
    assert!(out.starts_with("NOAUTH"), "{out}");

    // Without a certificate, or with one of another CA: refused in the
    // handshake, nothing written.
    let rogue = (d.join("rogue-client.crt"), d.join("rogue-client.key"));
    for client in [None, Some((rogue.0.as_path(), rogue.1.as_path()))] {
        let (out, _) = redis_cli_tls(tls.port(), &ca, client, &["SET", "intruder", "x"]);
        assert_ne!(out, "OK", "{client:?}");
    }
    // Plain RESP to the TLS port gets no RESP answer.
    let mut s = std::net::TcpStream::connect(tls).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$8\r\nintruder\r\n$1\r\nx\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(!got.starts_with(b"+"), "{got:?}");

    // Python's client: a large value and a large pipeline.
    let py = Command::new("/usr/bin/python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/py/tls_client.py"
        ))
        .arg(tls.port().to_string())
        .args([&ca, &cert, &key])
        .arg(PASSWORD)
        .output()
        .expect("python3 (apt-get install -y python3-redis)");
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );

    // One store behind both ports; the refused clients wrote nothing.
    let mut c = Conn::open(plain);
    assert_eq!(c.cmd(&["AUTH", PASSWORD]), Reply::ok());
    assert_eq!(
        c.cmd(&["GET", "k"]),
        Reply::Bulk(Some(b"over tls".to_vec()))
    );
    assert_eq!(
        c.cmd(&["GET", "py:count"]),
        Reply::Bulk(Some(b"1".to_vec()))
    );
    assert_eq!(c.cmd(&["EXISTS", "intruder"]), Reply::Integer(0));

    // A client that never finishes its TLS handshake, and one on the
    // plain port that never authenticates, are closed (10 s after they
    // connect; read_to_end returns once they are), and counted.
    let metrics = ready["metrics"]
        .as_str()
        .expect("metrics address")
        .to_string();
    let closed = || {
        let text = common::scrape(&metrics);
        common::value(&text, "xlane_kv_clients_closed_total{reason=\"timeout\"}")
    };
    let closed_before = closed();
    let waits: Vec<_> = [tls, plain]
        .into_iter()
        .map(|to| {
            std::thread::spawn(move || {
                let mut idle = std::net::TcpStream::connect(to).unwrap();
                if to == plain {
                    // It may ping: that takes no password.
                    idle.write_all(b"PING\r\n").unwrap();
                }
                idle.set_read_timeout(Some(std::time::Duration::from_secs(60)))
                    .unwrap();
                let mut rest = Vec::new();
                idle.read_to_end(&mut rest).map(|_| rest)
            })
        })
        .collect();
    for (w, what) in waits.into_iter().zip(["TLS handshake", "AUTH"]) {
        let got = w.join().unwrap();
        assert!(got.is_ok(), "a client without its {what} was not closed");
    }
    assert_eq!(closed(), closed_before + 2.0);
}
