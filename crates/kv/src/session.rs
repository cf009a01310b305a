//! What the RESP front end keeps per connection and shares between
//! connections: a connection's [`Session`] (`READONLY`, `MULTI` state,
//! `CLIENT` name and id) and the commands about it ([`session_command`]),
//! the server's [`Stats`], Redis Cluster's [`hash_slot`] and the reply for a
//! replication failure ([`replica_error_reply`]: `-MOVED <slot> <leader>`
//! when this member is not the leader, `-TRYAGAIN` with no leader known).

use crate::acl::UserTable;
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
    /// `CLIENT ID`: unique in this process (0 for a default session).
    pub id: u64,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// After `HELLO 3`: replies in RESP3 ([`crate::resp3`]).
    pub resp3: bool,
    /// The user it runs as (`AUTH`, `HELLO ... AUTH`): `None` for
    /// `default`, as every connection starts.
    pub user: Option<Vec<u8>>,
    /// Redis' `c->authenticated`: set at connection when the `default`
    /// user needs no password, and by a successful `AUTH`. A connection
    /// not authenticated while `default` needs a password is refused
    /// every command but `AUTH`, `HELLO`, `QUIT` and `RESET`
    /// ([`auth_required`]).
    pub authenticated: bool,
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

    /// The name of the user it runs as.
    pub fn user_name(&self) -> &[u8] {
        self.user.as_deref().unwrap_or(b"default")
    }

    /// Runs as the `default` user again, authenticated as Redis
    /// authenticates a new connection (`RESET`, a connection's start):
    /// when `default` is on and needs no password.
    pub fn default_auth(&mut self, users: &UserTable) {
        self.user = None;
        self.authenticated = users
            .default_user()
            .is_some_and(|d| d.nopass() && d.enabled());
    }
}

/// Whether a connection not authenticated is refused (Redis'
/// `authRequired`): the `default` user needs a password or is off.
pub fn auth_required(users: &UserTable) -> bool {
    users
        .default_user()
        .map_or(true, |d| !d.nopass() || !d.enabled())
}

/// `-NOAUTH Authentication required.`
pub const ERR_NOAUTH: &str = "NOAUTH Authentication required.";

/// `HELLO` without `AUTH` on a connection not authenticated.
pub const ERR_HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";

/// How a server's users start (`xlane kv serve --requirepass PASS
/// --aclfile FILE`). Every member of a group must be started with the same
/// settings and the same file: each builds its initial table from them
/// ([`AclStart::initial`]) before it replays the log, and every later
/// change (`ACL SETUSER`, `DELUSER`, `LOAD`, `CONFIG SET requirepass`) is
/// a replicated op applied on top of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclStart {
    /// `--requirepass`: the `default` user's password.
    pub requirepass: Option<Vec<u8>>,
    /// `--aclfile`: the ACL file (`ACL LOAD` reads it again, `ACL SAVE`
    /// writes it).
    pub aclfile: Option<std::path::PathBuf>,
}

impl AclStart {
    /// The table a member starts with: the ACL file's users (the whole
    /// file or an error, as `ACL LOAD`), then `requirepass` given to the
    /// `default` user; and the `requirepass` value.
    pub fn initial(&self) -> Result<(UserTable, Vec<u8>), String> {
        let mut t = UserTable::new();
        if let Some(f) = &self.aclfile {
            let text = std::fs::read(f)
                .map_err(|e| format!("cannot read the ACL file {}: {e}", f.display()))?;
            t.apply_load(&text, &f.display().to_string())
                .map_err(|e| e.to_string())?;
        }
        let pass = self.requirepass.clone().unwrap_or_default();
        if !pass.is_empty() {
            t.set_requirepass(&pass);
        }
        Ok((t, pass))
    }

    /// The ACL file's name as messages give it.
    pub fn file_name(&self) -> Option<String> {
        self.aclfile.as_ref().map(|f| f.display().to_string())
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
            _ => crate::cmd::args::arity_error("client|setname"),
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
    let mut open = Session {
        authenticated: true,
        ..session.clone()
    };
    let r = hello_as(&mut open, args, &UserTable::new()).0;
    session.resp3 = open.resp3;
    session.name = open.name;
    r
}

/// `HELLO [protover [AUTH user pass] [SETNAME name]]` against the users of
/// `users`, as Redis 7.0 answers it: a failed `AUTH` is `-WRONGPASS` (and
/// the user tried is returned, for the ACL log); without `AUTH` a
/// connection not authenticated gets `-NOAUTH`; nothing changes unless it
/// succeeds.
pub fn hello_as(
    session: &mut Session,
    args: &crate::resp::Command,
    users: &UserTable,
) -> (Reply, Option<Vec<u8>>) {
    let mut resp3 = session.resp3;
    if let Some(v) = args.get(1) {
        match crate::resp::parse_i64_strict(v) {
            Some(2) => resp3 = false,
            Some(3) => resp3 = true,
            Some(_) => return (Reply::err("NOPROTO unsupported protocol version"), None),
            None => {
                return (
                    Reply::err("ERR Protocol version is not an integer or out of range"),
                    None,
                )
            }
        }
    }
    let mut name = None;
    let mut auth: Option<(&Vec<u8>, &Vec<u8>)> = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_lowercase();
        match opt.as_slice() {
            b"auth" if i + 2 < args.len() => {
                auth = Some((&args[i + 1], &args[i + 2]));
                i += 3;
            }
            b"setname" if i + 1 < args.len() => {
                let n = &args[i + 1];
                if n.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                    return (Reply::err(ERR_CLIENT_NAME), None);
                }
                name = Some(n.clone());
                i += 2;
            }
            _ => {
                return (
                    Reply::err(format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(&args[i])
                    )),
                    None,
                )
            }
        }
    }
    match auth {
        Some((user, pass)) => {
            if users.authenticate(user, pass).is_err() {
                return (crate::acl::AuthError.reply(), Some(user.clone()));
            }
            session.user = (user.as_slice() != b"default").then(|| user.clone());
            session.authenticated = true;
        }
        None if !session.authenticated => return (Reply::err(ERR_HELLO_NOAUTH), None),
        None => {}
    }
    session.resp3 = resp3;
    if let Some(n) = name {
        session.name = (!n.is_empty()).then_some(n);
    }
    let kv = |k: &str, v: Reply| (Reply::bulk(k), v);
    let map = Reply::Map(vec![
        kv("server", Reply::bulk("redis")),
        kv("version", Reply::bulk("7.0.0")),
        kv("proto", Reply::Integer(if resp3 { 3 } else { 2 })),
        kv("id", Reply::Integer(session.id as i64)),
        kv("mode", Reply::bulk("cluster")),
        kv("role", Reply::bulk("master")),
        kv("modules", Reply::Array(Some(Vec::new()))),
    ]);
    (map, None)
}

/// Answers the commands about the connection itself (`HELLO`, `READONLY`,
/// `READWRITE`, `CLIENT SETNAME/GETNAME/ID`); `None` for every other
/// command. `in_multi`: the connection is between `MULTI` and `EXEC`,
/// where `HELLO` and `CLIENT` are queued, not answered here.
pub fn session_command(
    session: &mut Session,
    args: &crate::resp::Command,
    in_multi: bool,
) -> Option<Reply> {
    if args
        .first()
        .is_some_and(|n| n.eq_ignore_ascii_case(b"hello"))
        && !in_multi
    {
        return Some(hello(session, args));
    }
    if args
        .first()
        .is_some_and(|n| n.eq_ignore_ascii_case(b"client"))
        && !in_multi
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
    /// Connections refused past `maxclients`.
    pub rejected: AtomicU64,
    /// Clients closed past their `client-output-buffer-limit`.
    pub output_limit_closed: AtomicU64,
    /// Clients closed idle past `timeout`.
    pub idle_closed: AtomicU64,
    /// Calls per command of [`crate::cmd::table::TABLE`], by its index.
    calls: std::sync::OnceLock<Vec<AtomicU64>>,
}

impl Stats {
    fn call_slots(&self) -> &[AtomicU64] {
        self.calls.get_or_init(|| {
            crate::cmd::table::TABLE
                .iter()
                .map(|_| AtomicU64::new(0))
                .collect()
        })
    }

    /// Counts a call of the command `spec` describes (one of
    /// [`crate::cmd::table::TABLE`]'s).
    pub fn count_call(&self, spec: &'static crate::cmd::table::CommandSpec) {
        // The spec lies in the table: its index from its address.
        let table = crate::cmd::table::TABLE;
        let at = (spec as *const crate::cmd::table::CommandSpec as usize)
            .wrapping_sub(table.as_ptr() as usize)
            / std::mem::size_of::<crate::cmd::table::CommandSpec>();
        if let Some(n) = self.call_slots().get(at) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Calls per command since start, the commands called at least once.
    pub fn calls(&self) -> Vec<(&'static str, u64)> {
        crate::cmd::table::TABLE
            .iter()
            .zip(self.call_slots())
            .map(|(c, n)| (c.name, n.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
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
            assert_eq!(
                session_command(&mut s[c], &args, false),
                Some(want),
                "{line}"
            );
        }
        let id = s[0].id as i64;
        let args = cmd(&["client", "id"]);
        assert_eq!(
            session_command(&mut s[0], &args, false),
            Some(Reply::Integer(id))
        );
        assert_eq!(
            session_command(&mut s[0], &cmd(&["client", "list"]), false),
            None
        );
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
