//! A real `redis-server` for a test, on a port of its own, stopped (by its
//! PID) when dropped; and a raw RESP connection to it, so that a test can
//! compare replies (and the bytes of values) with xlane kv's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `name` on the PATH, or a panic that says which Debian package holds it
/// (`scripts/test.sh` installs it).
pub fn tool(name: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "{name} not found in PATH: install the Debian package {package} \
         (apt-get install -y {package}); scripts/test.sh does this"
    );
}

/// A `redis-server` this test started.
pub struct RealRedis {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for RealRedis {
    fn drop(&mut self) {
        // Only the process this test started, by PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RealRedis {
    /// Starts one (no persistence) and waits until it accepts connections.
    pub fn start() -> RealRedis {
        RealRedis::start_with(&[])
    }

    /// Starts one with extra `--name value` arguments.
    pub fn start_with(extra: &[&str]) -> RealRedis {
        let bin = tool("redis-server", "redis-server");
        let port = xlane_testports::tcp().port();
        let dir = tempfile::tempdir().expect("tempdir");
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let r = RealRedis {
            child,
            port,
            _dir: dir,
        };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    /// A new connection to it.
    pub fn conn(&self) -> Resp {
        Resp::connect(self.port)
    }
}

/// A RESP reply, as read off the wire (RESP2 and RESP3).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `+...`
    Simple(String),
    /// `-...`
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n ...` (`None`: `$-1` or RESP3's `_`).
    Bulk(Option<Vec<u8>>),
    /// `*n ...` (`None`: `*-1`), and RESP3's sets, maps (flattened),
    /// pushes.
    Array(Option<Vec<Value>>),
    /// RESP3 `,` double, as sent.
    Double(String),
}

impl Value {
    /// The bytes of a bulk reply.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(Some(b)) => Some(b),
            _ => None,
        }
    }
}

/// A raw RESP connection.
pub struct Resp {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Resp {
    /// Connects to 127.0.0.1:`port`.
    pub fn connect(port: u16) -> Resp {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        Resp {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        }
    }

    /// Sends one command.
    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&out).expect("send");
    }

    /// Sends one command and reads its reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Value {
        self.send(args);
        self.read()
    }

    /// [`Resp::cmd`] with the words given as text, split on spaces.
    pub fn line(&mut self, line: &str) -> Value {
        let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
        self.cmd(&words)
    }

    /// Reads one reply.
    pub fn read(&mut self) -> Value {
        let mut line = String::new();
        self.r.read_line(&mut line).expect("read reply");
        let line = line.trim_end_matches("\r\n");
        let (t, rest) = line.split_at(1);
        let n = || rest.parse::<i64>().expect("length");
        match t {
            "+" => Value::Simple(rest.into()),
            "-" => Value::Error(rest.into()),
            ":" => Value::Int(n()),
            "," => Value::Double(rest.into()),
            "_" => Value::Bulk(None),
            "#" => Value::Int(i64::from(rest == "t")),
            "$" | "=" => {
                if n() < 0 {
                    return Value::Bulk(None);
                }
                let mut b = vec![0; n() as usize + 2];
                self.r.read_exact(&mut b).expect("bulk");
                b.truncate(b.len() - 2);
                Value::Bulk(Some(b))
            }
            "*" | "~" | ">" => {
                if n() < 0 {
                    return Value::Array(None);
                }
                Value::Array(Some((0..n()).map(|_| self.read()).collect()))
            }
            "%" => Value::Array(Some((0..2 * n()).map(|_| self.read()).collect())),
            other => panic!("unexpected reply type {other:?} in {line:?}"),
        }
    }
}
