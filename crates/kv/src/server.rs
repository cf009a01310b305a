//! The TCP server: one thread per connection, pipelining (every complete
//! request in a read is answered, in order, with one write), bounded input
//! (a protocol error or an over-limit request gets `-ERR Protocol error:
//! ...` and the connection is closed; the server goes on).
//!
//! Redirects: when the [`Replicator`] says this node is not the leader, the
//! reply is Redis Cluster's `-MOVED <slot> <host:port>` with the key's hash
//! slot (CRC16 of the key or its `{hash tag}`, mod 16384; 0 for keyless
//! commands), so `redis-cli -c` and cluster-aware clients follow it. With
//! no known leader the reply is `-TRYAGAIN no leader known, retry later`.

use crate::commands::{classify, Action};
use crate::replicator::{ReplicaError, Replicator};
use crate::resp::{Limits, Parser, Reply};
use crate::txn::Step;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

/// Replies are written once this many bytes are pending, even in the middle
/// of a pipeline (bounds the output buffer).
const OUT_FLUSH: usize = 1 << 20;

/// This node's wall clock, ms since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Redis Cluster's hash slot of a key.
pub fn hash_slot(key: &[u8]) -> u16 {
    const X: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    let k = match key.iter().position(|&b| b == b'{') {
        Some(s) => match key[s + 1..].iter().position(|&b| b == b'}') {
            Some(0) | None => key,
            Some(e) => &key[s + 1..s + 1 + e],
        },
        None => key,
    };
    X.checksum(k) % 16384
}

/// The reply for a replication failure.
pub fn replica_error_reply(e: &ReplicaError, key: Option<&[u8]>) -> Reply {
    match e {
        ReplicaError::NotLeader { leader: Some(l) } => {
            Reply::err(format!("MOVED {} {l}", key.map_or(0, hash_slot)))
        }
        ReplicaError::NotLeader { leader: None } => {
            Reply::err("TRYAGAIN no leader known, retry later")
        }
        ReplicaError::Unavailable(m) => Reply::err(format!("ERR replication unavailable: {m}")),
        ReplicaError::Io(e) => Reply::err(format!("MISCONF Errors writing to the AOF file: {e}")),
        ReplicaError::Refused(m) => Reply::err(format!("ERR {m}")),
    }
}

/// What a connection has asked for about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    /// After `READONLY` (as in Redis Cluster, for reads from replicas):
    /// reads are served from this member's state as it is, without the
    /// read-index round trip — possibly stale on a follower, never torn.
    /// `READWRITE` turns it off again (the default: linearizable reads).
    pub readonly: bool,
    /// `MULTI`/`EXEC`/`WATCH` state.
    pub txn: crate::txn::Txn,
    /// `CLIENT ID`: unique in this process (0 for a default session).
    pub id: u64,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
}

impl Session {
    /// A new connection's session, with the next `CLIENT ID`.
    pub fn new() -> Session {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Session {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            ..Session::default()
        }
    }
}

/// `CLIENT SETNAME`'s refusal of a name with spaces or special characters.
pub const ERR_CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

/// `CLIENT SETNAME`, `GETNAME` and `ID`: the connection's own.
fn client_command(session: &mut Session, args: &crate::resp::Command) -> Option<Reply> {
    let sub = args.get(1)?.to_ascii_lowercase();
    Some(match sub.as_slice() {
        b"setname" => match args.get(2) {
            Some(name) if args.len() == 3 => {
                if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                    Reply::err(ERR_CLIENT_NAME)
                } else {
                    session.name = (!name.is_empty()).then(|| name.clone());
                    Reply::ok()
                }
            }
            _ => crate::commands::arity_error("client|setname"),
        },
        b"getname" if args.len() == 2 => Reply::Bulk(session.name.clone()),
        b"id" if args.len() == 2 => Reply::Integer(session.id as i64),
        _ => return None,
    })
}

/// Answers the commands about the connection itself (`READONLY`,
/// `READWRITE`, `CLIENT SETNAME/GETNAME/ID`); `None` for every other
/// command.
pub fn session_command(session: &mut Session, args: &crate::resp::Command) -> Option<Reply> {
    if args
        .first()
        .is_some_and(|n| n.eq_ignore_ascii_case(b"client"))
        && !session.txn.in_multi()
    {
        return client_command(session, args);
    }
    if let [name] = &args[..] {
        if name.eq_ignore_ascii_case(b"readonly") || name.eq_ignore_ascii_case(b"readwrite") {
            session.readonly = name.eq_ignore_ascii_case(b"readonly");
            return Some(Reply::ok());
        }
    }
    None
}

/// Runs one request through the replicator. The second value is true for
/// `QUIT` (close after replying).
pub fn handle(
    repl: &dyn Replicator,
    session: &mut Session,
    args: &crate::resp::Command,
    now: u64,
) -> (Reply, bool) {
    if let Some(r) = session_command(session, args) {
        return (r, false);
    }
    match session.txn.step(args, now) {
        Step::Pass => {}
        Step::Reply(r) => return (r, false),
        Step::Watch(keys) => {
            expire_due(repl, now);
            if !session.readonly {
                if let Err(e) = repl.read_barrier() {
                    return (
                        replica_error_reply(&e, keys.first().map(|k| k.as_slice())),
                        false,
                    );
                }
            }
            return match repl.store().read() {
                Ok(s) => {
                    let v = keys.into_iter().map(|k| {
                        let v = s.version(&k, now);
                        (k, v)
                    });
                    session.txn.watch(v.collect());
                    (Reply::ok(), false)
                }
                Err(_) => (Reply::err("ERR store lock poisoned"), false),
            };
        }
        Step::Exec(op) => {
            let key = op.cmd.first_key().map(<[u8]>::to_vec);
            return match repl.propose(op) {
                Ok(r) => (r, false),
                Err(e) => (replica_error_reply(&e, key.as_deref()), false),
            };
        }
    }
    match classify(args, now) {
        Action::Reply(r) => (r, false),
        Action::Quit => (Reply::ok(), true),
        Action::Member(_) => (Reply::err(crate::commands::ERR_NOT_CLUSTER), false),
        Action::Setting(crate::commands::SettingCmd::ConfigGet(p)) => (
            crate::commands::config_get(&p, crate::pubsub::NotifyFlags::NONE),
            false,
        ),
        Action::PubSub(_) | Action::Setting(_) => {
            (Reply::err(crate::commands::ERR_NEEDS_MEMBER), false)
        }
        Action::Write(op) => {
            let key = op.cmd.first_key().map(<[u8]>::to_vec);
            match repl.propose(op) {
                Ok(r) => (r, false),
                Err(e) => (replica_error_reply(&e, key.as_deref()), false),
            }
        }
        Action::Read(cmd) => {
            expire_due(repl, now);
            if cmd.needs_barrier() && !session.readonly {
                if let Err(e) = repl.read_barrier() {
                    return (replica_error_reply(&e, cmd.first_key()), false);
                }
            }
            match repl.store().read() {
                Ok(s) => (cmd.execute(&s, now), false),
                Err(_) => (Reply::err("ERR store lock poisoned"), false),
            }
        }
    }
}

/// Lazy expiry before a read: proposes the removal of every key due at
/// `now` ([`crate::expiry::due`], in bounded batches), so a read never
/// meets a key this server's leader clock has expired. On a follower the
/// first proposal is refused and the read goes on.
fn expire_due(repl: &dyn Replicator, now: u64) {
    loop {
        let op = match repl.store().read() {
            Ok(s) => crate::expiry::due(&s, now),
            Err(_) => None,
        };
        let Some(op) = op else { break };
        if repl.propose(op).is_err() {
            break;
        }
    }
}

/// A bound listener, not yet serving.
pub struct Server {
    listener: TcpListener,
    repl: Arc<dyn Replicator>,
    limits: Limits,
}

/// Counters shared by the connections.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Requests answered.
    pub commands: AtomicU64,
    /// Connections closed for a protocol error.
    pub protocol_errors: AtomicU64,
}

struct Shared {
    stop: AtomicBool,
    conns: Mutex<HashMap<u64, TcpStream>>,
    stats: Stats,
}

/// A server running in the background ([`Server::spawn`]).
pub struct ServerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `addr`.
    pub fn bind(
        addr: impl ToSocketAddrs,
        repl: Arc<dyn Replicator>,
        limits: Limits,
    ) -> std::io::Result<Server> {
        Ok(Server {
            listener: TcpListener::bind(addr)?,
            repl,
            limits,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends.
    pub fn serve(self) -> std::io::Result<()> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            stats: Stats::default(),
        });
        self.accept_loop(&shared);
        Ok(())
    }

    /// Serves on a background thread until [`ServerHandle::shutdown`].
    pub fn spawn(self) -> std::io::Result<ServerHandle> {
        let addr = self.local_addr()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            stats: Stats::default(),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kv-accept".into())
            .spawn(move || self.accept_loop(&sh))?;
        Ok(ServerHandle {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    fn accept_loop(self, shared: &Arc<Shared>) {
        let mut next_id = 0u64;
        for conn in self.listener.incoming() {
            if shared.stop.load(Ordering::Acquire) {
                break;
            }
            let Ok(stream) = conn else { continue };
            next_id += 1;
            let id = next_id;
            if let (Ok(clone), Ok(mut conns)) = (stream.try_clone(), shared.conns.lock()) {
                conns.insert(id, clone);
            }
            shared.stats.connections.fetch_add(1, Ordering::Relaxed);
            let repl = self.repl.clone();
            let sh = shared.clone();
            let limits = self.limits;
            let spawned = std::thread::Builder::new()
                .name("kv-conn".into())
                .spawn(move || {
                    let _ = connection(stream, &*repl, limits, &sh.stats);
                    if let Ok(mut c) = sh.conns.lock() {
                        c.remove(&id);
                    }
                });
            if spawned.is_err() {
                if let Ok(mut c) = shared.conns.lock() {
                    if let Some(s) = c.remove(&id) {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                }
            }
        }
    }
}

impl ServerHandle {
    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Stops accepting, closes every connection, and waits for the accept
    /// thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Ok(conns) = self.shared.conns.lock() {
            for s in conns.values() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop();
        }
    }
}

fn connection(
    mut stream: TcpStream,
    repl: &dyn Replicator,
    limits: Limits,
    stats: &Stats,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut parser = Parser::new(limits);
    let mut session = Session::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut out = Vec::with_capacity(16 << 10);
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        parser.feed(&chunk[..n]);
        loop {
            match parser.next_command() {
                Ok(Some(args)) => {
                    let (reply, quit) = handle(repl, &mut session, &args, now_ms());
                    stats.commands.fetch_add(1, Ordering::Relaxed);
                    reply.encode(&mut out);
                    if quit {
                        stream.write_all(&out)?;
                        return Ok(());
                    }
                    if out.len() >= OUT_FLUSH {
                        stream.write_all(&out)?;
                        out.clear();
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                    Reply::err(format!("ERR {e}")).encode(&mut out);
                    stream.write_all(&out)?;
                    let _ = stream.shutdown(Shutdown::Both);
                    return Ok(());
                }
            }
        }
        if !out.is_empty() {
            stream.write_all(&out)?;
            out.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::WriteOp;
    use crate::replicator::{LocalReplicator, SharedStore};

    /// A member whose read index never comes back (a follower cut off from
    /// its leader), over a local store for the writes.
    struct CutOff(LocalReplicator);

    impl Replicator for CutOff {
        fn propose(&self, op: WriteOp) -> Result<Reply, ReplicaError> {
            self.0.propose(op)
        }
        fn read_barrier(&self) -> Result<(), ReplicaError> {
            Err(ReplicaError::NotLeader { leader: None })
        }
        fn store(&self) -> &SharedStore {
            self.0.store()
        }
    }

    fn cmd(words: &[&str]) -> crate::resp::Command {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn readonly_reads_skip_the_read_index_and_readwrite_restores_it() {
        let r = CutOff(LocalReplicator::in_memory());
        let mut s = Session::default();
        assert_eq!(
            handle(&r, &mut s, &cmd(&["SET", "k", "v"]), 1).0,
            Reply::ok()
        );
        // Linearizable by default: the read index fails, so the read does.
        assert!(matches!(
            handle(&r, &mut s, &cmd(&["GET", "k"]), 1).0,
            Reply::Error(_)
        ));
        assert_eq!(handle(&r, &mut s, &cmd(&["readonly"]), 1).0, Reply::ok());
        assert_eq!(
            handle(&r, &mut s, &cmd(&["GET", "k"]), 1).0,
            Reply::Bulk(Some(b"v".to_vec()))
        );
        assert_eq!(handle(&r, &mut s, &cmd(&["READWRITE"]), 1).0, Reply::ok());
        assert!(matches!(
            handle(&r, &mut s, &cmd(&["GET", "k"]), 1).0,
            Reply::Error(_)
        ));
        // With arguments it is not the session command.
        assert!(matches!(
            handle(&r, &mut s, &cmd(&["READONLY", "x"]), 1).0,
            Reply::Error(_)
        ));
    }

    /// CLIENT SETNAME/GETNAME/ID answer per connection.
    #[test]
    fn client_name_and_id_are_the_connections() {
        let mut s = [Session::new(), Session::new()];
        assert_ne!(s[0].id, s[1].id);
        for (c, line, want) in [
            (0, "CLIENT GETNAME", Reply::nil()),
            (0, "CLIENT SETNAME app", Reply::ok()),
            (0, "CLIENT GETNAME", Reply::bulk("app")),
            (1, "CLIENT GETNAME", Reply::nil()),
            (1, "CLIENT SETNAME \"a b\"", Reply::err(ERR_CLIENT_NAME)),
            (
                1,
                "CLIENT SETNAME",
                Reply::err("ERR wrong number of arguments for 'client|setname' command"),
            ),
            (0, "CLIENT SETNAME \"\"", Reply::ok()),
            (0, "CLIENT GETNAME", Reply::nil()),
        ] {
            let args = crate::resp::split_inline(line.as_bytes()).expect("parses");
            assert_eq!(session_command(&mut s[c], &args), Some(want), "{line}");
        }
        let id = s[0].id as i64;
        let args = cmd(&["client", "id"]);
        assert_eq!(session_command(&mut s[0], &args), Some(Reply::Integer(id)));
        assert_eq!(session_command(&mut s[0], &cmd(&["client", "list"])), None);
    }

    #[test]
    fn slots() {
        let table: &[(&[u8], u16)] = &[
            (b"foo", 12182),
            (b"123456789", 0x31C3),
            (b"{user1000}.following", hash_slot(b"user1000")),
            (b"{}x", hash_slot(b"{}x")),
            (b"a{b", hash_slot(b"a{b")),
        ];
        for (k, want) in table {
            assert_eq!(hash_slot(k), *want, "{}", String::from_utf8_lossy(k));
        }
        assert_eq!(
            hash_slot(b"{user1000}.following"),
            hash_slot(b"{user1000}.followers")
        );
        assert_ne!(hash_slot(b"{}x"), hash_slot(b"{}y"));
    }

    #[test]
    fn replica_errors() {
        let moved = replica_error_reply(
            &ReplicaError::NotLeader {
                leader: Some("10.0.0.1:6380".into()),
            },
            Some(b"foo"),
        );
        assert_eq!(moved, Reply::err("MOVED 12182 10.0.0.1:6380"));
        let keyless = replica_error_reply(
            &ReplicaError::NotLeader {
                leader: Some("h:1".into()),
            },
            None,
        );
        assert_eq!(keyless, Reply::err("MOVED 0 h:1"));
    }
}
