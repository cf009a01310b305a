//! What the RESP front end keeps per connection and shares between
//! connections: a connection's [`Session`] (`READONLY`, `MULTI` state,
//! `CLIENT` name and id) and the commands about it ([`session_command`]),
//! the server's [`Stats`], Redis Cluster's [`hash_slot`] and the reply for a
//! replication failure ([`replica_error_reply`]: `-MOVED <slot> <leader>`
//! when this member is not the leader, `-TRYAGAIN` with no leader known).

use crate::replicator::ReplicaError;
use crate::resp::Reply;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

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
    /// After `HELLO 3`: replies in RESP3 ([`crate::resp3`]).
    pub resp3: bool,
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

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`: switches the
/// connection to RESP2 or RESP3 and describes the server (a map). There
/// are no passwords: `AUTH` is taken for the `default` user only, as a
/// Redis without `requirepass` takes it.
pub fn hello(session: &mut Session, args: &crate::resp::Command) -> Reply {
    let mut resp3 = session.resp3;
    if let Some(v) = args.get(1) {
        match crate::resp::parse_i64_strict(v) {
            Some(2) => resp3 = false,
            Some(3) => resp3 = true,
            Some(_) => return Reply::err("NOPROTO unsupported protocol version"),
            None => return Reply::err("ERR Protocol version is not an integer or out of range"),
        }
    }
    let mut name = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_lowercase();
        match opt.as_slice() {
            b"auth" if i + 2 < args.len() => {
                if !args[i + 1].eq_ignore_ascii_case(b"default") {
                    return Reply::err(
                        "WRONGPASS invalid username-password pair or user is disabled.",
                    );
                }
                i += 3;
            }
            b"setname" if i + 1 < args.len() => {
                let n = &args[i + 1];
                if n.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                    return Reply::err(ERR_CLIENT_NAME);
                }
                name = Some(n.clone());
                i += 2;
            }
            _ => {
                return Reply::err(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(&args[i])
                ))
            }
        }
    }
    session.resp3 = resp3;
    if let Some(n) = name {
        session.name = (!n.is_empty()).then_some(n);
    }
    let kv = |k: &str, v: Reply| (Reply::bulk(k), v);
    Reply::Map(vec![
        kv("server", Reply::bulk("redis")),
        kv("version", Reply::bulk("7.0.0")),
        kv("proto", Reply::Integer(if resp3 { 3 } else { 2 })),
        kv("id", Reply::Integer(session.id as i64)),
        kv("mode", Reply::bulk("cluster")),
        kv("role", Reply::bulk("master")),
        kv("modules", Reply::Array(Some(Vec::new()))),
    ])
}

/// Answers the commands about the connection itself (`HELLO`, `READONLY`,
/// `READWRITE`, `CLIENT SETNAME/GETNAME/ID`); `None` for every other
/// command.
pub fn session_command(session: &mut Session, args: &crate::resp::Command) -> Option<Reply> {
    if args
        .first()
        .is_some_and(|n| n.eq_ignore_ascii_case(b"hello"))
        && !session.txn.in_multi()
    {
        return Some(hello(session, args));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&str]) -> crate::resp::Command {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
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
