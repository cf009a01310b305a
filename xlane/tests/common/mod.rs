//! What the kv integration tests share: starting a member up to its ready
//! line, and a minimal pipelining RESP client.
// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

pub mod procs;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;
use xlane_kv::resp::{decode_reply, encode_command, Reply};

/// The `xlaned` binary: its own package, built beside `xlane` with the same
/// profile (by `cargo test --workspace`, or `cargo build -p xlaned`).
pub fn xlaned_bin() -> std::path::PathBuf {
    let p = std::path::Path::new(env!("CARGO_BIN_EXE_xlane")).with_file_name("xlaned");
    assert!(
        p.exists(),
        "{} is missing: xlaned is a package of its own; build it with the same \
         profile first (`cargo build -p xlaned`, or run `cargo test --workspace`)",
        p.display()
    );
    p
}

/// Spawns `cmd` (an `xlane kv ...`) with stdout piped and waits for its
/// first line, the ready line; returns the child, the rest of its stdout and
/// that line.
pub fn spawn_until_ready(cmd: &mut Command) -> (Child, BufReader<ChildStdout>, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn xlane");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready line");
    assert!(line.contains("\"event\":\"ready\""), "{line}");
    (child, out, line)
}

/// Children this test started, killed by PID and reaped when it ends,
/// however it ends (a failed assertion too).
pub struct Children(pub Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// SIGTERM by PID to a child this test started, and wait for it.
pub fn stop(mut c: Child) {
    // SAFETY: a plain syscall on the PID of a child this test started.
    unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
    let _ = c.wait();
}

/// One RESP connection; every read and write waits at most its timeout.
pub struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects within `timeout`; `None` if the member cannot be reached.
    pub fn try_open(addr: SocketAddr, timeout: Duration) -> Option<Conn> {
        let s = TcpStream::connect_timeout(&addr, timeout).ok()?;
        s.set_read_timeout(Some(timeout)).ok()?;
        s.set_write_timeout(Some(timeout)).ok()?;
        let _ = s.set_nodelay(true);
        Some(Conn { s, buf: Vec::new() })
    }

    /// Connects (10 s per step), or panics.
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::try_open(addr, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("cannot connect to {addr}"))
    }

    /// Sends every command at once and reads one reply each; `None` on a
    /// timeout, a closed connection or a malformed reply.
    pub fn try_pipeline<A: AsRef<[u8]>>(&mut self, cmds: &[Vec<A>]) -> Option<Vec<Reply>> {
        let mut out = Vec::new();
        for c in cmds {
            let args: Vec<Vec<u8>> = c.iter().map(|a| a.as_ref().to_vec()).collect();
            encode_command(&args, &mut out);
        }
        self.s.write_all(&out).ok()?;
        let mut replies = Vec::new();
        let mut chunk = [0u8; 16 << 10];
        while replies.len() < cmds.len() {
            match decode_reply(&self.buf).ok()? {
                Some((r, n)) => {
                    self.buf.drain(..n);
                    replies.push(r);
                }
                None => {
                    let n = self.s.read(&mut chunk).ok()?;
                    if n == 0 {
                        return None;
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
        Some(replies)
    }

    /// The next frame the server sends unasked (a pub/sub message), `None`
    /// as for [`Conn::try_pipeline`].
    pub fn try_read(&mut self) -> Option<Reply> {
        let mut chunk = [0u8; 16 << 10];
        loop {
            if let Some((r, n)) = decode_reply(&self.buf).ok()? {
                self.buf.drain(..n);
                return Some(r);
            }
            let n = self.s.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// One command's reply, `None` as for [`Conn::try_pipeline`].
    pub fn try_cmd<A: AsRef<[u8]>>(&mut self, c: &[A]) -> Option<Reply> {
        let args: Vec<&[u8]> = c.iter().map(AsRef::as_ref).collect();
        self.try_pipeline(&[args]).map(|mut r| r.remove(0))
    }

    /// [`Conn::try_pipeline`] that panics instead of `None`.
    pub fn pipeline<A: AsRef<[u8]>>(&mut self, cmds: &[Vec<A>]) -> Vec<Reply> {
        self.try_pipeline(cmds)
            .expect("replies (timeout, closed connection or a malformed reply)")
    }

    /// [`Conn::try_cmd`] that panics instead of `None`.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, c: &[A]) -> Reply {
        self.try_cmd(c)
            .expect("a reply (timeout, closed connection or a malformed reply)")
    }
}

/// One GET of a daemon's `/metrics` at `addr` (the whole response).
pub fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to /metrics");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    out
}

/// The value of the sample `series` (name and labels, as written).
pub fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in {text}"))
        .parse()
        .unwrap()
}

/// Writes a CA, a server certificate for 127.0.0.1 and a client
/// certificate it signs into `dir` with `openssl` (v3 certificates, as
/// Redis's own test certificates are): `ca.crt`, `server.{crt,key}`,
/// `client.{crt,key}`; `prefix` names a second set (an unknown CA).
pub fn make_certs(dir: &std::path::Path, prefix: &str) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("openssl: {e} (apt-get install -y openssl)"));
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let f = |name: &str| format!("{prefix}{name}");
    std::fs::write(dir.join(f("server.ext")), "subjectAltName=IP:127.0.0.1\n").unwrap();
    std::fs::write(
        dir.join(f("client.ext")),
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    // A fresh P-256 key, unencrypted.
    let new_key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let (ca_key, ca_crt) = (f("ca.key"), f("ca.crt"));
    run(&[
        &["req", "-x509"][..],
        &new_key,
        &["-keyout", &ca_key, "-out", &ca_crt, "-days", "2"],
        &["-subj", "/CN=xlane test CA"],
    ]
    .concat());
    for who in ["server", "client"] {
        let (key, csr, crt, ext) = (
            f(&format!("{who}.key")),
            f(&format!("{who}.csr")),
            f(&format!("{who}.crt")),
            f(&format!("{who}.ext")),
        );
        let subject = format!("/CN=xlane {who}");
        run(&[
            &["req"][..],
            &new_key,
            &["-keyout", &key, "-out", &csr, "-subj", &subject],
        ]
        .concat());
        run(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            &ext,
        ]);
    }
}
