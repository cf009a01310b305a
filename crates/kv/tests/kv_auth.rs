//! Access control end to end: a single node and a three-member group
//! started with `--requirepass` / `--aclfile` (as `xlane kv serve` starts
//! them: [`xlane_kv::session::AclStart`]), driven by `redis-cli` and a raw
//! RESP connection. Replies are Redis 7.0.15's (checked against a real
//! `redis-server` started with the same settings where they are
//! deterministic).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlane_kv::raft::{LogFsync, StorageConfig};
use xlane_kv::resp::{decode_reply, encode_command, Limits, Reply};
use xlane_kv::session::AclStart;
use xlane_kv::{Peer, RaftConfig, RaftReplicator, Stats};

mod support;
use support::cluster::{TEST_LATENCY_NS, TEST_PERIOD_NS};
use support::real_redis::{tool, RealRedis};

/// Members started with `acl`, their client addresses and log directories.
struct Group {
    nodes: Vec<RaftReplicator>,
    addrs: Vec<String>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Drop for Group {
    fn drop(&mut self) {
        for n in &self.nodes {
            n.shutdown();
        }
    }
}

impl Group {
    /// `n` members (1: a single node) with the same start settings.
    fn start(n: u64, acl: &AclStart) -> Group {
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("listen"))
            .collect();
        let addrs: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().expect("addr").to_string())
            .collect();
        let dirs: Vec<_> = (0..n).map(|_| tempfile::tempdir().expect("dir")).collect();
        let peers: BTreeMap<u64, Peer> = (1..=n)
            .map(|id| {
                let raft = xlane_testports::raft();
                let client = addrs[id as usize - 1].clone();
                (id, Peer { raft, client })
            })
            .collect();
        let nodes = listeners
            .into_iter()
            .zip(1..=n)
            .map(|(l, id)| {
                let mut st = StorageConfig::new(dirs[id as usize - 1].path());
                st.fsync = LogFsync::Never;
                let mut cfg = if n == 1 {
                    RaftConfig::single(addrs[0].clone(), st, 10_000_000, 20_000_000)
                } else {
                    RaftConfig::new(id, peers.clone(), st, TEST_PERIOD_NS, TEST_LATENCY_NS)
                }
                .expect("cfg");
                cfg.acl = acl.clone();
                let stats = Arc::new(Stats::default());
                RaftReplicator::start_serving(cfg, l, Limits::default(), stats)
                    .expect("start")
                    .0
            })
            .collect();
        Group {
            nodes,
            addrs,
            _dirs: dirs,
        }
    }

    /// The index of the leader, once every member agrees on it.
    fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen: Vec<u64> = self.nodes.iter().map(|n| n.leader_id()).collect();
            if seen[0] != 0 && seen.iter().all(|&s| s == seen[0]) {
                return seen[0] as usize - 1;
            }
            assert!(Instant::now() < deadline, "no leader: {seen:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A raw RESP connection.
struct Conn(TcpStream, Vec<u8>);

impl Conn {
    fn open(addr: &str) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Conn(s, Vec::new())
    }

    /// Sends `words` and reads the reply (`None`: the server closed).
    fn try_cmd(&mut self, words: &[&str]) -> Option<Reply> {
        let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        let mut out = Vec::new();
        encode_command(&args, &mut out);
        self.0.write_all(&out).ok()?;
        let mut chunk = [0u8; 4096];
        loop {
            if let Ok(Some((r, used))) = decode_reply(&self.1) {
                self.1.drain(..used);
                return Some(r);
            }
            let n = self.0.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            self.1.extend_from_slice(&chunk[..n]);
        }
    }

    fn cmd(&mut self, words: &[&str]) -> Reply {
        self.try_cmd(words)
            .unwrap_or_else(|| panic!("connection closed on {words:?}"))
    }
}

/// Runs `redis-cli` with `args` (a command) and returns its stdout.
fn cli(addr: &str, args: &[&str]) -> String {
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let out = Command::new(tool("redis-cli", "redis-tools"))
        .args(["-h", host, "-p", port, "--no-auth-warning"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn err(s: &str) -> Reply {
    Reply::err(s)
}

const NOAUTH: &str = "NOAUTH Authentication required.";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Every command before AUTH is refused, AUTH opens the connection.
fn requirepass_gate(addr: &str) {
    let mut c = Conn::open(addr);
    for words in [
        &["PING"][..],
        &["GET", "k"],
        &["SET", "k", "v"],
        &["CLIENT", "SETNAME", "x"],
        &["ACL", "WHOAMI"],
        &["MULTI"],
        &["CONFIG", "GET", "requirepass"],
        &["SUBSCRIBE", "ch"],
    ] {
        assert_eq!(c.cmd(words), err(NOAUTH), "{words:?}");
    }
    // Errors Redis gives before the check.
    let unknown = c.cmd(&["NOSUCH"]);
    assert!(matches!(&unknown, Reply::Error(e) if e.starts_with("ERR unknown command")));
    assert_eq!(
        c.cmd(&["GET"]),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(c.cmd(&["AUTH", "nope"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "default", "nope"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "a", "b", "c"]), err("ERR syntax error"));
    assert!(matches!(c.cmd(&["HELLO", "3"]), Reply::Error(e) if e.starts_with("NOAUTH HELLO")));
    assert_eq!(c.cmd(&["AUTH", "secret"]), Reply::ok());
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), Reply::bulk("default"));
    assert_eq!(c.cmd(&["RESET"]), Reply::Simple("RESET".into()));
    assert_eq!(c.cmd(&["PING"]), err(NOAUTH));
    // HELLO ... AUTH authenticates and switches the protocol at once.
    assert!(matches!(
        c.cmd(&["HELLO", "2", "AUTH", "default", "secret"]),
        Reply::Map(_) | Reply::Array(_)
    ));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // The failed AUTHs are in this member's log.
    match c.cmd(&["ACL", "LOG"]) {
        Reply::Array(Some(v)) => assert!(!v.is_empty()),
        Reply::Map(_) => {}
        r => panic!("ACL LOG: {r:?}"),
    }
    // redis-cli, as a user would.
    assert!(cli(addr, &["PING"]).contains("NOAUTH"));
    assert_eq!(cli(addr, &["-a", "secret", "PING"]).trim(), "PONG");
}

/// Permissions: a user limited to GET on `k*`.
fn permissions(addr: &str) {
    let mut admin = Conn::open(addr);
    assert_eq!(admin.cmd(&["AUTH", "secret"]), Reply::ok());
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "u", "on", ">p", "~k*", "+get"]),
        Reply::ok()
    );
    let mut u = Conn::open(addr);
    assert_eq!(u.cmd(&["AUTH", "u", "p"]), Reply::ok());
    assert_eq!(u.cmd(&["GET", "k1"]), Reply::nil());
    assert_eq!(
        u.cmd(&["GET", "zz"]),
        err("NOPERM this user has no permissions to access one of the keys used as arguments")
    );
    assert_eq!(
        u.cmd(&["SET", "k", "1"]),
        err("NOPERM this user has no permissions to run the 'set' command")
    );
    assert_eq!(
        u.cmd(&["ACL", "WHOAMI"]),
        err("NOPERM this user has no permissions to run the 'acl|whoami' command")
    );
    // CLIENT LIST on the admin's connection names the user.
    match admin.cmd(&["CLIENT", "LIST"]) {
        Reply::Bulk(Some(b)) => {
            let text = String::from_utf8_lossy(&b).into_owned();
            assert!(text.contains(" user=u "), "{text}");
            assert!(text.contains(" user=default "), "{text}");
        }
        r => panic!("CLIENT LIST: {r:?}"),
    }
    // The denials are logged with Redis's fields.
    match admin.cmd(&["ACL", "LOG", "1"]) {
        Reply::Array(Some(v)) => {
            let flat = String::from_utf8_lossy(&Reply::Array(Some(v)).to_bytes()).into_owned();
            assert!(flat.contains("acl|whoami"), "{flat}");
            assert!(flat.contains("toplevel"), "{flat}");
            assert!(flat.contains("cmd=acl|whoami user=u "), "{flat}");
        }
        r => panic!("ACL LOG: {r:?}"),
    }
    // Inside MULTI a refused command aborts EXEC.
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "u", "+multi", "+exec"]),
        Reply::ok()
    );
    assert_eq!(u.cmd(&["MULTI"]), Reply::ok());
    assert_eq!(
        u.cmd(&["SET", "k", "1"]),
        err("NOPERM this user has no permissions to run the 'set' command")
    );
    assert_eq!(u.cmd(&["GET", "k"]), Reply::Simple("QUEUED".into()));
    assert!(matches!(u.cmd(&["EXEC"]), Reply::Error(e) if e.starts_with("EXECABORT")));
    // Deleting the user closes its connection.
    assert_eq!(
        admin.cmd(&["ACL", "DELUSER", "u", "nobody"]),
        Reply::Integer(1)
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if u.try_cmd(&["GET", "k"]).is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the deleted user's connection stays"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "u"]), Reply::Integer(0));
    assert_eq!(
        admin.cmd(&["ACL", "DELUSER", "default"]),
        err("ERR The 'default' user cannot be removed")
    );
}

#[test]
fn single_node_with_requirepass() {
    let acl = AclStart {
        requirepass: Some(b"secret".to_vec()),
        aclfile: None,
    };
    let g = Group::start(1, &acl);
    g.leader();
    requirepass_gate(&g.addrs[0]);
    permissions(&g.addrs[0]);
    // CONFIG SET requirepass: the new password from now on; connections
    // already authenticated stay so.
    let mut c = Conn::open(&g.addrs[0]);
    assert_eq!(c.cmd(&["AUTH", "secret"]), Reply::ok());
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "requirepass", "other"]),
        Reply::ok()
    );
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "requirepass"]),
        Reply::Array(Some(vec![Reply::bulk("requirepass"), Reply::bulk("other")]))
    );
    let mut d = Conn::open(&g.addrs[0]);
    assert_eq!(d.cmd(&["AUTH", "secret"]), err(WRONGPASS));
    assert_eq!(d.cmd(&["AUTH", "other"]), Reply::ok());
    // An empty one turns the password off.
    assert_eq!(c.cmd(&["CONFIG", "SET", "requirepass", ""]), Reply::ok());
    assert_eq!(
        Conn::open(&g.addrs[0]).cmd(&["PING"]),
        Reply::Simple("PONG".into())
    );
}

#[test]
fn the_same_replies_as_redis() {
    let redis = RealRedis::start_with(&["--requirepass", "secret"]);
    let g = Group::start(
        1,
        &AclStart {
            requirepass: Some(b"secret".to_vec()),
            aclfile: None,
        },
    );
    g.leader();
    let ours = &g.addrs[0];
    let theirs = format!("127.0.0.1:{}", redis.port);
    let script: &[&[&str]] = &[
        &["GET", "k"],
        &["AUTH", "x"],
        &["AUTH", "u", "x"],
        &["HELLO", "3"],
        &["HELLO", "2", "AUTH", "default", "bad"],
        &["AUTH", "secret"],
        &["ACL", "SETUSER", "u", "on", ">p", "~k*", "&ch", "+get"],
        &["ACL", "SETUSER", "v", "bad-rule"],
        &["ACL", "GETUSER", "nobody"],
        &["ACL", "LIST"],
        &["ACL", "USERS"],
        &["ACL", "DRYRUN", "u", "get", "k1"],
        &["ACL", "DRYRUN", "u", "get", "x"],
        &["ACL", "DRYRUN", "u", "set", "k1", "v"],
        &["ACL", "CAT", "nosuch"],
        &["ACL", "LOAD"],
        &["ACL", "SAVE"],
        &["ACL", "GENPASS", "0"],
        &["AUTH", "u", "p"],
        &["ACL", "WHOAMI"],
        &["PUBLISH", "other", "m"],
        &["SET", "k1", "v"],
        &["GET", "other"],
        &["AUTH", "default", "secret"],
        &["ACL", "DELUSER", "u", "v"],
    ];
    let (mut a, mut b) = (Conn::open(ours), Conn::open(&theirs));
    for words in script {
        assert_eq!(a.cmd(words), b.cmd(words), "{words:?}");
    }
}

#[test]
fn cluster_with_requirepass_replicates_users() {
    let acl = AclStart {
        requirepass: Some(b"secret".to_vec()),
        aclfile: None,
    };
    let g = Group::start(3, &acl);
    let l = g.leader();
    for addr in &g.addrs {
        let mut c = Conn::open(addr);
        assert_eq!(c.cmd(&["GET", "k"]), err(NOAUTH), "{addr}");
        assert_eq!(c.cmd(&["AUTH", "secret"]), Reply::ok(), "{addr}");
        assert_eq!(c.cmd(&["GET", "k"]), Reply::nil(), "{addr}");
    }
    requirepass_gate(&g.addrs[l]);
    let mut c = Conn::open(&g.addrs[l]);
    assert_eq!(c.cmd(&["AUTH", "secret"]), Reply::ok());
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "alice", "on", ">a1", "~a:*", "+@read", "-keys"]),
        Reply::ok()
    );
    assert_eq!(c.cmd(&["SET", "sync", "1"]), Reply::ok());
    let want = c.cmd(&["ACL", "LIST"]);
    for (i, addr) in g.addrs.iter().enumerate() {
        let mut m = Conn::open(addr);
        assert_eq!(m.cmd(&["AUTH", "secret"]), Reply::ok());
        // A follower answers after it applied the write behind the change.
        assert_eq!(m.cmd(&["GET", "sync"]), Reply::bulk("1"), "{addr}");
        assert_eq!(m.cmd(&["ACL", "LIST"]), want, "member {}", i + 1);
        let mut u = Conn::open(addr);
        assert_eq!(u.cmd(&["AUTH", "alice", "a1"]), Reply::ok(), "{addr}");
        assert_eq!(u.cmd(&["GET", "a:1"]), Reply::nil(), "{addr}");
    }
    // A change asked of a follower is redirected to the leader.
    let f = (l + 1) % 3;
    let mut m = Conn::open(&g.addrs[f]);
    assert_eq!(m.cmd(&["AUTH", "secret"]), Reply::ok());
    assert!(matches!(
        m.cmd(&["ACL", "SETUSER", "bob", "on"]),
        Reply::Error(e) if e.starts_with("MOVED")
    ));
    // redis-cli on a follower sees the replicated users.
    let users = cli(&g.addrs[f], &["-a", "secret", "ACL", "USERS"]);
    assert_eq!(
        users.split_whitespace().collect::<Vec<_>>(),
        ["alice", "default"]
    );
}

#[test]
fn aclfile_with_two_users() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("users.acl");
    std::fs::write(
        &file,
        "user default on >secret ~* &* +@all\nuser reader on >r ~* -@all +get +ping\n",
    )
    .expect("write acl file");
    let acl = AclStart {
        requirepass: None,
        aclfile: Some(file.clone()),
    };
    for n in [1, 3] {
        let g = Group::start(n, &acl);
        let l = g.leader();
        for addr in &g.addrs {
            let mut c = Conn::open(addr);
            assert_eq!(c.cmd(&["PING"]), err(NOAUTH));
            assert_eq!(c.cmd(&["AUTH", "reader", "r"]), Reply::ok());
            assert_eq!(c.cmd(&["GET", "k"]), Reply::nil());
            assert_eq!(
                c.cmd(&["SET", "k", "v"]),
                err("NOPERM this user has no permissions to run the 'set' command")
            );
        }
        let mut admin = Conn::open(&g.addrs[l]);
        assert_eq!(admin.cmd(&["AUTH", "secret"]), Reply::ok());
        assert_eq!(
            admin.cmd(&["ACL", "USERS"]),
            Reply::Array(Some(vec![Reply::bulk("default"), Reply::bulk("reader")]))
        );
        // ACL SAVE writes the member's users; ACL LOAD reads them back
        // and closes the connections of users other than default.
        let mut reader = Conn::open(&g.addrs[l]);
        assert_eq!(reader.cmd(&["AUTH", "reader", "r"]), Reply::ok());
        assert_eq!(
            admin.cmd(&["ACL", "SETUSER", "w", "on", ">w", "+set", "~*"]),
            Reply::ok()
        );
        assert_eq!(admin.cmd(&["ACL", "SAVE"]), Reply::ok());
        let saved = std::fs::read_to_string(&file).expect("saved");
        assert!(saved.contains("user w on"), "{saved}");
        assert_eq!(admin.cmd(&["ACL", "LOAD"]), Reply::ok());
        assert_eq!(admin.cmd(&["PING"]), Reply::Simple("PONG".into()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while reader.try_cmd(&["PING"]).is_some() {
            assert!(Instant::now() < deadline, "reader stays after ACL LOAD");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Put the file back for the next round.
        std::fs::write(
            &file,
            "user default on >secret ~* &* +@all\nuser reader on >r ~* -@all +get +ping\n",
        )
        .expect("rewrite acl file");
    }
}
