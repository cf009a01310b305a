//! `CLIENT LIST` and `CLIENT INFO`: one line per connection in Redis 7's
//! format (`id=3 addr=127.0.0.1:52555 laddr=... name= age=0 ... cmd=get
//! ... resp=2`), so tools that parse it (redis-cli, monitoring agents)
//! read ours. Fields that describe Redis internals we do not have (the
//! query buffer's free space, memory accounting) are 0; the ones that
//! describe the connection are real.

use crate::resp::{Command, Reply};
use std::net::SocketAddr;

/// What a connection's line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFacts {
    /// `CLIENT ID`.
    pub id: u64,
    /// The client's address.
    pub addr: Option<SocketAddr>,
    /// Our address it connected to.
    pub laddr: Option<SocketAddr>,
    /// The connection's descriptor.
    pub fd: i32,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// Seconds since it connected.
    pub age_s: u64,
    /// Seconds since its last command.
    pub idle_s: u64,
    /// Inside `MULTI`: how many commands are queued.
    pub multi: Option<usize>,
    /// Channels it subscribes to.
    pub sub: usize,
    /// Patterns it subscribes to.
    pub psub: usize,
    /// Shard channels it subscribes to.
    pub ssub: usize,
    /// After `MONITOR`.
    pub monitor: bool,
    /// After `READONLY`.
    pub readonly: bool,
    /// Bytes received and not yet parsed.
    pub qbuf: usize,
    /// Reply bytes not yet written.
    pub obl: usize,
    /// The last command's name (`client|list` style for subcommands).
    pub cmd: String,
    /// The protocol it speaks (2, or 3 after `HELLO 3`).
    pub resp: u8,
    /// The user it runs as (`AUTH`).
    pub user: String,
}

impl ClientFacts {
    /// Redis' flags: `N` (none), `O` (MONITOR), `x` (in MULTI), `P`
    /// (pub/sub), `r` (READONLY).
    fn flags(&self) -> String {
        let mut f = String::new();
        if self.monitor {
            f.push('O');
        }
        if self.multi.is_some() {
            f.push('x');
        }
        if self.sub + self.psub + self.ssub > 0 {
            f.push('P');
        }
        if self.readonly {
            f.push('r');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }

    /// The line, `\n`-terminated.
    pub fn line(&self) -> String {
        let addr = |a: Option<SocketAddr>| a.map_or_else(String::new, |a| a.to_string());
        let name = self
            .name
            .as_deref()
            .map_or_else(String::new, |n| String::from_utf8_lossy(n).into_owned());
        format!(
            "id={} addr={} laddr={} fd={} name={name} age={} idle={} flags={} db=0 sub={} \
             psub={} ssub={} multi={} qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 \
             obl={} oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir=-1 resp={}\n",
            self.id,
            addr(self.addr),
            addr(self.laddr),
            self.fd,
            self.age_s,
            self.idle_s,
            self.flags(),
            self.sub,
            self.psub,
            self.ssub,
            self.multi.map_or(-1, |n| n as i64),
            self.qbuf,
            self.obl,
            self.cmd,
            self.user,
            self.resp,
        )
    }
}

/// The name `CLIENT LIST` shows for a command: `get`, `client|list`.
pub fn command_name(args: &Command) -> String {
    let Some(first) = args.first() else {
        return "NULL".into();
    };
    let mut name = String::from_utf8_lossy(first).to_ascii_lowercase();
    let container = matches!(
        name.as_str(),
        "client"
            | "config"
            | "cluster"
            | "command"
            | "object"
            | "memory"
            | "script"
            | "xinfo"
            | "acl"
    );
    if let Some(sub) = args.get(1).filter(|_| container) {
        name.push('|');
        name.push_str(&String::from_utf8_lossy(sub).to_ascii_lowercase());
    }
    name
}

/// Which connections `CLIENT LIST [TYPE t] [ID id ...]` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListFilter {
    /// `TYPE pubsub`: only subscribers; `TYPE normal`: only the others;
    /// `TYPE master|replica`: none (members replicate through raft, not
    /// through client connections).
    pub kind: Option<Kind>,
    /// `ID ...`: only these.
    pub ids: Option<Vec<u64>>,
}

/// `CLIENT LIST TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Not subscribed.
    Normal,
    /// Subscribed to a channel or pattern.
    PubSub,
    /// Replication links (none here).
    Replication,
}

impl ListFilter {
    /// Parses the arguments after `CLIENT LIST`.
    pub fn parse(rest: &[Vec<u8>]) -> Result<ListFilter, Reply> {
        let syntax = || Reply::err("ERR syntax error");
        let mut f = ListFilter::default();
        let mut i = 0;
        while i < rest.len() {
            let opt = rest[i].to_ascii_lowercase();
            match opt.as_slice() {
                b"type" if i + 1 < rest.len() => {
                    let t = rest[i + 1].to_ascii_lowercase();
                    f.kind = Some(match t.as_slice() {
                        b"normal" => Kind::Normal,
                        b"pubsub" => Kind::PubSub,
                        b"master" | b"replica" | b"slave" => Kind::Replication,
                        _ => {
                            return Err(Reply::err(format!(
                                "ERR Unknown client type '{}'",
                                String::from_utf8_lossy(&rest[i + 1])
                            )))
                        }
                    });
                    i += 2;
                }
                b"id" if i + 1 < rest.len() => {
                    let mut ids = Vec::new();
                    i += 1;
                    while i < rest.len() {
                        match crate::resp::parse_i64_strict(&rest[i]) {
                            Some(n) if n > 0 => ids.push(n as u64),
                            _ => return Err(Reply::err("ERR Invalid client ID")),
                        }
                        i += 1;
                    }
                    f.ids = Some(ids);
                }
                _ => return Err(syntax()),
            }
        }
        Ok(f)
    }

    /// Whether `c` is listed.
    pub fn keeps(&self, c: &ClientFacts) -> bool {
        let kind_ok = match self.kind {
            None => true,
            Some(Kind::Normal) => c.sub + c.psub + c.ssub == 0,
            Some(Kind::PubSub) => c.sub + c.psub + c.ssub > 0,
            Some(Kind::Replication) => false,
        };
        kind_ok && self.ids.as_ref().map_or(true, |ids| ids.contains(&c.id))
    }
}

/// `CLIENT LIST`'s reply: the lines of the connections `filter` keeps.
pub fn list_reply<'a>(
    filter: &ListFilter,
    clients: impl Iterator<Item = &'a ClientFacts>,
) -> Reply {
    let mut text = String::new();
    for c in clients.filter(|c| filter.keeps(c)) {
        text.push_str(&c.line());
    }
    Reply::bulk(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(id: u64) -> ClientFacts {
        ClientFacts {
            id,
            addr: Some("127.0.0.1:52555".parse().unwrap()),
            laddr: Some("127.0.0.1:6380".parse().unwrap()),
            fd: 8,
            name: None,
            age_s: 3,
            idle_s: 1,
            multi: None,
            sub: 0,
            psub: 0,
            ssub: 0,
            monitor: false,
            readonly: false,
            qbuf: 0,
            obl: 0,
            cmd: "client|list".into(),
            resp: 2,
            user: "default".into(),
        }
    }

    fn words(s: &str) -> Vec<Vec<u8>> {
        s.split_whitespace()
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn a_line_has_redis_fields_in_redis_order() {
        let mut c = facts(7);
        c.name = Some(b"worker".to_vec());
        c.multi = Some(2);
        c.readonly = true;
        let line = c.line();
        assert!(line.ends_with(" resp=2\n"), "{line}");
        let keys: Vec<&str> = line
            .split_whitespace()
            .map(|kv| kv.split('=').next().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "id",
                "addr",
                "laddr",
                "fd",
                "name",
                "age",
                "idle",
                "flags",
                "db",
                "sub",
                "psub",
                "ssub",
                "multi",
                "qbuf",
                "qbuf-free",
                "argv-mem",
                "multi-mem",
                "rbs",
                "rbp",
                "obl",
                "oll",
                "omem",
                "tot-mem",
                "events",
                "cmd",
                "user",
                "redir",
                "resp"
            ]
        );
        for want in [
            "id=7 ",
            "name=worker ",
            "flags=xr ",
            "multi=2 ",
            "cmd=client|list ",
        ] {
            assert!(line.contains(want), "{want} in {line}");
        }
    }

    #[test]
    fn flags_and_command_names() {
        let table: &[(Option<usize>, usize, bool, &str)] = &[
            (None, 0, false, "N"),
            (Some(0), 0, false, "x"),
            (None, 2, false, "P"),
            (None, 0, true, "r"),
        ];
        for &(multi, sub, readonly, want) in table {
            let mut c = facts(1);
            c.multi = multi;
            c.sub = sub;
            c.readonly = readonly;
            assert_eq!(c.flags(), want);
        }
        assert_eq!(command_name(&words("GET k")), "get");
        assert_eq!(command_name(&words("CLIENT SetName x")), "client|setname");
        assert_eq!(command_name(&words("config get maxmemory")), "config|get");
        assert_eq!(command_name(&Vec::new()), "NULL");
    }

    #[test]
    fn filters_parse_and_keep() {
        let table: &[(&str, Result<ListFilter, Reply>)] = &[
            ("", Ok(ListFilter::default())),
            (
                "TYPE pubsub",
                Ok(ListFilter {
                    kind: Some(Kind::PubSub),
                    ids: None,
                }),
            ),
            (
                "id 3 4",
                Ok(ListFilter {
                    kind: None,
                    ids: Some(vec![3, 4]),
                }),
            ),
            ("TYPE x", Err(Reply::err("ERR Unknown client type 'x'"))),
            ("ID 0", Err(Reply::err("ERR Invalid client ID"))),
            ("ID", Err(Reply::err("ERR syntax error"))),
            ("BOGUS", Err(Reply::err("ERR syntax error"))),
        ];
        for (args, want) in table {
            assert_eq!(&ListFilter::parse(&words(args)), want, "{args}");
        }
        let mut subscriber = facts(2);
        subscriber.sub = 1;
        let all = [facts(1), subscriber];
        let ids = |f: &ListFilter| -> Vec<u64> {
            all.iter().filter(|c| f.keeps(c)).map(|c| c.id).collect()
        };
        assert_eq!(ids(&ListFilter::parse(&words("TYPE normal")).unwrap()), [1]);
        assert_eq!(ids(&ListFilter::parse(&words("TYPE pubsub")).unwrap()), [2]);
        assert_eq!(
            ids(&ListFilter::parse(&words("TYPE replica")).unwrap()),
            [0u64; 0]
        );
        assert_eq!(ids(&ListFilter::parse(&words("ID 2 9")).unwrap()), [2]);
    }
}
