//! `bench kv --workload redis-benchmark` against a real redis-server on a
//! scratch port: the driver sends what redis-benchmark sends (same keys,
//! same types, the counts the commands imply), counts error replies and
//! WAIT's, and the CSV parser reads the real redis-benchmark's output. No
//! timing is asserted. A missing redis-server or redis-benchmark is a
//! failure (scripts/test.sh installs them).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xlane_bench::kv_bench::redis_benchmark::driver::{run_suite, run_test, DriverConfig};
use xlane_bench::kv_bench::redis_benchmark::suite::{by_name, parse_output, DEFAULT_TESTS};
use xlane_bench::kv_bench::systems::which;
use xlane_bench::kv_bench::wire::{info_field, Resp};
use xlane_kv::resp::Reply;

fn tool(name: &str) -> PathBuf {
    which(name).unwrap_or_else(|| {
        panic!(
            "{name} not found: apt-get install -y redis-server redis-tools (scripts/test.sh does)"
        )
    })
}

/// A redis-server on a free loopback port, killed (by its PID) and its
/// directory removed on drop.
struct Redis {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Redis {
    fn start(tag: &str, replicaof: Option<u16>) -> Redis {
        let port = xlane_testports::tcp().port();
        let dir = std::env::temp_dir().join(format!("xlane-rbench-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let mut cmd = Command::new(tool("redis-server"));
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir);
        if let Some(p) = replicaof {
            cmd.args(["--replicaof", "127.0.0.1", &p.to_string()]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let r = Redis {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while r.conn().is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server on {port} did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    fn conn(&self) -> Result<Resp, String> {
        let mut c = Resp::connect(self.addr, Duration::from_secs(5))?;
        match c.cmd(&[b"PING"])? {
            Reply::Simple(_) => Ok(c),
            r => Err(format!("{r:?}")),
        }
    }

    /// Every key with its type, sorted.
    fn keys_and_types(&self) -> Vec<(String, String)> {
        let mut c = self.conn().expect("connect");
        let Reply::Array(Some(keys)) = c.cmd(&[b"KEYS", b"*"]).expect("KEYS") else {
            panic!("KEYS did not answer an array");
        };
        let mut out: Vec<(String, String)> = keys
            .into_iter()
            .map(|k| {
                let Reply::Bulk(Some(k)) = k else {
                    panic!("a key that is not a bulk string");
                };
                let t = match c.cmd(&[b"TYPE", &k]).expect("TYPE") {
                    Reply::Simple(t) => t,
                    r => panic!("TYPE: {r:?}"),
                };
                (String::from_utf8_lossy(&k).into_owned(), t)
            })
            .collect();
        out.sort();
        out
    }
}

fn cfg(requests: u64, wait: Option<u32>) -> DriverConfig {
    DriverConfig {
        connections: 5,
        pipeline: 16,
        requests,
        wait_replicas: wait,
        stall: Duration::from_secs(20),
    }
}

fn bulk(c: &mut Resp, args: &[&[u8]]) -> Option<Vec<u8>> {
    match c.cmd(args).expect("command") {
        Reply::Bulk(b) => b,
        Reply::Integer(i) => Some(i.to_string().into_bytes()),
        r => panic!("{args:?}: {r:?}"),
    }
}

#[test]
fn driver_sends_what_redis_benchmark_sends() {
    let redis = Redis::start("a", None);
    // Not a multiple of the pipeline: the last batches are short. Enough
    // that redis-benchmark's millisecond clock times every test (else it
    // prints `inf`).
    let n = 20_003;
    let runs = run_suite(redis.addr, &DEFAULT_TESTS, &cfg(n, None), &|| false).expect("driver");
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    let want: Vec<&str> = DEFAULT_TESTS.iter().map(|t| t.name).collect();
    assert_eq!(names, want);
    for r in &runs {
        assert_eq!(r.requests, n, "{}", r.name);
        assert_eq!(r.errors, 0, "{}: {:?}", r.name, r.first_error);
    }
    // What exactly n of each command leaves behind.
    let mut c = redis.conn().expect("connect");
    let n_s = n.to_string().into_bytes();
    assert_eq!(
        bulk(&mut c, &[b"GET", b"counter:__rand_int__"]),
        Some(n_s.clone())
    );
    // LPUSH, RPUSH, LPOP, RPOP, then the LRANGE test's LPUSH: n left.
    assert_eq!(bulk(&mut c, &[b"LLEN", b"mylist"]), Some(n_s));
    assert_eq!(
        bulk(&mut c, &[b"GET", b"key:__rand_int__"]),
        Some(b"VXK".to_vec())
    );
    assert_eq!(
        bulk(&mut c, &[b"HGET", b"myhash", b"element:__rand_int__"]),
        Some(b"VXK".to_vec())
    );
    let driven = redis.keys_and_types();

    // The real redis-benchmark on an emptied server leaves the same keys
    // of the same types, and its CSV names the same tests in order.
    assert_eq!(c.cmd(&[b"FLUSHALL"]).expect("FLUSHALL"), Reply::ok());
    let out = Command::new(tool("redis-benchmark"))
        .args(["-h", "127.0.0.1", "-p", &redis.addr.port().to_string()])
        .args(["-P", "16", "-q", "-n", &n.to_string(), "-c", "5", "--csv"])
        .output()
        .expect("run redis-benchmark");
    assert!(out.status.success(), "redis-benchmark: {}", out.status);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let parsed = parse_output(&text);
    let csv_names: Vec<&str> = parsed.rows.iter().map(|(r, _)| r.test.as_str()).collect();
    assert_eq!(csv_names, want, "{text}");
    for (r, errs) in &parsed.rows {
        assert!(errs.is_empty(), "{}: {errs:?}", r.test);
        assert!(r.rps.is_some_and(|x| x > 0.0), "{}", r.test);
        assert!(by_name(&r.test).is_some());
    }
    assert!(parsed.trailing.is_empty(), "{:?}", parsed.trailing);
    assert_eq!(redis.keys_and_types(), driven);
}

#[test]
fn wait_replies_and_error_replies_are_counted() {
    let primary = Redis::start("p", None);
    let replica = Redis::start("r", Some(primary.addr.port()));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = replica
            .conn()
            .expect("replica")
            .info("replication")
            .expect("INFO");
        if info_field(&info, "master_link_status") == Some("up") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica did not sync");
        std::thread::sleep(Duration::from_millis(50));
    }
    let set = by_name("SET").expect("SET");
    let get = by_name("GET").expect("GET");
    // WAIT 1 0 after every batch: its replies are neither requests nor
    // errors.
    let r = run_test(primary.addr, set, &cfg(100, Some(1)), &|| false).expect("SET with WAIT");
    assert_eq!((r.requests, r.errors), (100, 0), "{:?}", r.first_error);
    // A read test gets no WAIT (it would count an error on a replica).
    let r = run_test(replica.addr, get, &cfg(50, Some(1)), &|| false).expect("GET");
    assert_eq!((r.requests, r.errors), (50, 0), "{:?}", r.first_error);
    // Writes on a read-only replica: every reply is an error, counted, and
    // WAIT on a replica is one too.
    let r = run_test(replica.addr, set, &cfg(40, Some(1)), &|| false).expect("SET on replica");
    assert_eq!(r.requests, 40);
    assert!(r.errors >= 40, "{} errors", r.errors);
    assert!(
        r.first_error
            .as_deref()
            .is_some_and(|e| e.starts_with("READONLY")),
        "{:?}",
        r.first_error
    );
}
