//! A member's configuration, as `CONFIG GET` and `CONFIG SET` show and
//! change it: every parameter of Redis 7.0 by its name (aliases included),
//! its default, how a value is checked, and whether it can change at run
//! time, with Redis's error texts.
//!
//! Most parameters tune what xlane kv does not have (encodings, RDB/AOF,
//! replication, threads): they are kept and shown as set, so that clients
//! and test harnesses that set them work, and have no effect. The ones that
//! act are listed in [`ACTING`]. A member's configuration is its own (as a
//! Redis node's is); the parameters that shape replicated data travel in
//! the ops instead (see `docs/kv-commands.md`).

use crate::limits::{parse_memory, ClientLimits, OutputLimits};
use crate::notify::{glob_match, NotifyFlags};
use std::collections::BTreeMap;

/// How a value of a parameter is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `yes` or `no`.
    Bool,
    /// An integer.
    Int,
    /// A memory amount: an integer with an optional unit (`kb`, `mb`,
    /// `gb`, `k`, `m`, `g`, any case).
    Mem,
    /// A memory amount or a percentage (`maxmemory-clients`).
    MemOrPercent,
    /// One of these words.
    Enum(&'static [&'static str]),
    /// `save`: pairs of seconds and changes, or empty.
    Save,
    /// `notify-keyspace-events` flags.
    Notify,
    /// `client-output-buffer-limit`: `class hard soft seconds` groups; a
    /// `CONFIG SET` changes the classes it names.
    BufferLimits,
    /// Any text.
    Text,
}

/// Whether a parameter can change at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutability {
    /// `CONFIG SET` changes it.
    Mutable,
    /// Set at start only: "can't set immutable config".
    Immutable,
    /// "can't set protected config" (`dir`, `dbfilename`).
    Protected,
}

use Kind::*;
use Mutability::*;

/// A parameter: name, default, kind, mutability.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// Its value at start.
    pub default: &'static str,
    /// How a value is checked.
    pub kind: Kind,
    /// Whether `CONFIG SET` may change it.
    pub mutability: Mutability,
}

const fn p(name: &'static str, default: &'static str, kind: Kind, m: Mutability) -> Param {
    Param {
        name,
        default,
        kind,
        mutability: m,
    }
}

/// The parameters that act in xlane kv; every other one is kept and shown
/// only.
pub const ACTING: &[&str] = &[
    "notify-keyspace-events",
    "requirepass",
    "maxmemory",
    "maxmemory-policy",
    "maxclients",
    "timeout",
    "client-output-buffer-limit",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
    "hll-sparse-max-bytes",
    "stream-node-max-entries",
    "stream-node-max-bytes",
    "acllog-max-len",
    "acl-pubsub-default",
    "tracking-table-max-keys",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "latency-monitor-threshold",
    "lua-time-limit",
    "busy-reply-threshold",
];

/// Every parameter of Redis 7.0 (canonical names; aliases in [`ALIASES`]).
pub const PARAMS: &[Param] = &[
    p(
        "acl-pubsub-default",
        "resetchannels",
        Enum(&["allchannels", "resetchannels"]),
        Mutable,
    ),
    p("aclfile", "", Text, Immutable),
    p("acllog-max-len", "128", Int, Mutable),
    p("active-defrag-cycle-max", "25", Int, Mutable),
    p("active-defrag-cycle-min", "1", Int, Mutable),
    p("active-defrag-ignore-bytes", "104857600", Mem, Mutable),
    p("active-defrag-max-scan-fields", "1000", Int, Mutable),
    p("active-defrag-threshold-lower", "10", Int, Mutable),
    p("active-defrag-threshold-upper", "100", Int, Mutable),
    p("active-expire-effort", "1", Int, Mutable),
    p("activedefrag", "no", Bool, Mutable),
    p("activerehashing", "yes", Bool, Mutable),
    p("always-show-logo", "no", Bool, Immutable),
    p("aof-disable-auto-gc", "no", Bool, Mutable),
    p("aof-load-truncated", "yes", Bool, Mutable),
    p("aof-rewrite-incremental-fsync", "yes", Bool, Mutable),
    p("aof-timestamp-enabled", "no", Bool, Mutable),
    p("aof-use-rdb-preamble", "yes", Bool, Mutable),
    p("aof_rewrite_cpulist", "", Text, Immutable),
    p("appenddirname", "appendonlydir", Text, Immutable),
    p("appendfilename", "appendonly.aof", Text, Immutable),
    p(
        "appendfsync",
        "everysec",
        Enum(&["always", "everysec", "no"]),
        Mutable,
    ),
    p("appendonly", "no", Bool, Mutable),
    p("auto-aof-rewrite-min-size", "67108864", Mem, Mutable),
    p("auto-aof-rewrite-percentage", "100", Int, Mutable),
    p("bgsave_cpulist", "", Text, Immutable),
    p("bind", "* -::*", Text, Mutable),
    p("bind-source-addr", "", Text, Mutable),
    p("bio_cpulist", "", Text, Immutable),
    p("busy-reply-threshold", "5000", Int, Mutable),
    p(
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        BufferLimits,
        Mutable,
    ),
    p("client-query-buffer-limit", "1073741824", Mem, Mutable),
    p("cluster-allow-pubsubshard-when-down", "yes", Bool, Mutable),
    p("cluster-allow-reads-when-down", "no", Bool, Mutable),
    p("cluster-allow-replica-migration", "yes", Bool, Mutable),
    p("cluster-announce-bus-port", "0", Int, Mutable),
    p("cluster-announce-hostname", "", Text, Mutable),
    p("cluster-announce-ip", "", Text, Mutable),
    p("cluster-announce-port", "0", Int, Mutable),
    p("cluster-announce-tls-port", "0", Int, Mutable),
    p("cluster-config-file", "nodes.conf", Text, Immutable),
    p("cluster-enabled", "no", Bool, Immutable),
    p("cluster-link-sendbuf-limit", "0", Int, Mutable),
    p("cluster-migration-barrier", "1", Int, Mutable),
    p("cluster-node-timeout", "15000", Int, Mutable),
    p("cluster-port", "0", Int, Immutable),
    p(
        "cluster-preferred-endpoint-type",
        "ip",
        Enum(&["ip", "hostname", "unknown-endpoint"]),
        Mutable,
    ),
    p("cluster-replica-no-failover", "no", Bool, Mutable),
    p("cluster-replica-validity-factor", "10", Int, Mutable),
    p("cluster-require-full-coverage", "yes", Bool, Mutable),
    p("crash-log-enabled", "yes", Bool, Mutable),
    p("crash-memcheck-enabled", "yes", Bool, Mutable),
    p("daemonize", "no", Bool, Immutable),
    p("databases", "16", Int, Immutable),
    p("dbfilename", "dump.rdb", Text, Protected),
    p("dir", "", Text, Protected),
    p("disable-thp", "yes", Bool, Immutable),
    p("dynamic-hz", "yes", Bool, Mutable),
    p(
        "enable-debug-command",
        "no",
        Enum(&["no", "yes", "local"]),
        Immutable,
    ),
    p(
        "enable-module-command",
        "no",
        Enum(&["no", "yes", "local"]),
        Immutable,
    ),
    p(
        "enable-protected-configs",
        "no",
        Enum(&["no", "yes", "local"]),
        Immutable,
    ),
    p("hash-max-listpack-entries", "512", Int, Mutable),
    p("hash-max-listpack-value", "64", Mem, Mutable),
    p("hll-sparse-max-bytes", "3000", Mem, Mutable),
    p("hz", "10", Int, Mutable),
    p("ignore-warnings", "", Text, Mutable),
    p("io-threads", "1", Int, Immutable),
    p("io-threads-do-reads", "no", Bool, Immutable),
    p("jemalloc-bg-thread", "yes", Bool, Mutable),
    p("latency-monitor-threshold", "0", Int, Mutable),
    p("latency-tracking", "yes", Bool, Mutable),
    p(
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        Text,
        Mutable,
    ),
    p("lazyfree-lazy-eviction", "no", Bool, Mutable),
    p("lazyfree-lazy-expire", "no", Bool, Mutable),
    p("lazyfree-lazy-server-del", "no", Bool, Mutable),
    p("lazyfree-lazy-user-del", "no", Bool, Mutable),
    p("lazyfree-lazy-user-flush", "no", Bool, Mutable),
    p("lfu-decay-time", "1", Int, Mutable),
    p("lfu-log-factor", "10", Int, Mutable),
    p("list-compress-depth", "0", Int, Mutable),
    p("list-max-listpack-size", "-2", Int, Mutable),
    p("logfile", "", Text, Immutable),
    p(
        "loglevel",
        "notice",
        Enum(&["debug", "verbose", "notice", "warning"]),
        Mutable,
    ),
    p("lua-time-limit", "5000", Int, Mutable),
    p("masterauth", "", Text, Mutable),
    p("masteruser", "", Text, Mutable),
    p("maxclients", "10000", Int, Mutable),
    p("maxmemory", "0", Mem, Mutable),
    p("maxmemory-clients", "0", MemOrPercent, Mutable),
    p("maxmemory-eviction-tenacity", "10", Int, Mutable),
    p(
        "maxmemory-policy",
        "noeviction",
        Enum(&[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ]),
        Mutable,
    ),
    p("maxmemory-samples", "5", Int, Mutable),
    p("min-replicas-max-lag", "10", Int, Mutable),
    p("min-replicas-to-write", "0", Int, Mutable),
    p("no-appendfsync-on-rewrite", "no", Bool, Mutable),
    p("notify-keyspace-events", "", Notify, Mutable),
    p(
        "oom-score-adj",
        "no",
        Enum(&["no", "yes", "relative", "absolute"]),
        Mutable,
    ),
    p("oom-score-adj-values", "0 200 800", Text, Mutable),
    p("pidfile", "", Text, Immutable),
    p("port", "6379", Int, Mutable),
    p(
        "proc-title-template",
        "{title} {listen-addr} {server-mode}",
        Text,
        Mutable,
    ),
    p(
        "propagation-error-behavior",
        "ignore",
        Enum(&["ignore", "panic", "panic-on-replicas"]),
        Mutable,
    ),
    p("protected-mode", "yes", Bool, Mutable),
    p("proto-max-bulk-len", "536870912", Mem, Mutable),
    p("rdb-del-sync-files", "no", Bool, Mutable),
    p("rdb-save-incremental-fsync", "yes", Bool, Mutable),
    p("rdbchecksum", "yes", Bool, Immutable),
    p("rdbcompression", "yes", Bool, Mutable),
    p("repl-backlog-size", "1048576", Mem, Mutable),
    p("repl-backlog-ttl", "3600", Int, Mutable),
    p("repl-disable-tcp-nodelay", "no", Bool, Mutable),
    p(
        "repl-diskless-load",
        "disabled",
        Enum(&["disabled", "on-empty-db", "swapdb"]),
        Mutable,
    ),
    p("repl-diskless-sync", "yes", Bool, Mutable),
    p("repl-diskless-sync-delay", "5", Int, Mutable),
    p("repl-diskless-sync-max-replicas", "0", Int, Mutable),
    p("repl-ping-replica-period", "10", Int, Mutable),
    p("repl-timeout", "60", Int, Mutable),
    p("replica-announce-ip", "", Text, Mutable),
    p("replica-announce-port", "0", Int, Mutable),
    p("replica-announced", "yes", Bool, Mutable),
    p("replica-ignore-disk-write-errors", "no", Bool, Mutable),
    p("replica-ignore-maxmemory", "yes", Bool, Mutable),
    p("replica-lazy-flush", "no", Bool, Mutable),
    p("replica-priority", "100", Int, Mutable),
    p("replica-read-only", "yes", Bool, Mutable),
    p("replica-serve-stale-data", "yes", Bool, Mutable),
    p("replicaof", "", Text, Mutable),
    p("requirepass", "", Text, Mutable),
    p(
        "sanitize-dump-payload",
        "no",
        Enum(&["no", "yes", "clients"]),
        Mutable,
    ),
    p("save", "", Save, Mutable),
    p("server_cpulist", "", Text, Immutable),
    p("set-max-intset-entries", "512", Int, Mutable),
    p("set-proc-title", "yes", Bool, Immutable),
    p(
        "shutdown-on-sigint",
        "default",
        Enum(&["default", "save", "nosave", "now", "force"]),
        Mutable,
    ),
    p(
        "shutdown-on-sigterm",
        "default",
        Enum(&["default", "save", "nosave", "now", "force"]),
        Mutable,
    ),
    p("shutdown-timeout", "10", Int, Mutable),
    p("slowlog-log-slower-than", "10000", Int, Mutable),
    p("slowlog-max-len", "128", Int, Mutable),
    p("socket-mark-id", "0", Int, Immutable),
    p("stop-writes-on-bgsave-error", "yes", Bool, Mutable),
    p("stream-node-max-bytes", "4096", Mem, Mutable),
    p("stream-node-max-entries", "100", Int, Mutable),
    p(
        "supervised",
        "no",
        Enum(&["upstart", "systemd", "auto", "no"]),
        Immutable,
    ),
    p("syslog-enabled", "no", Bool, Immutable),
    p(
        "syslog-facility",
        "local0",
        Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        Immutable,
    ),
    p("syslog-ident", "redis", Text, Immutable),
    p("tcp-backlog", "511", Int, Immutable),
    p("tcp-keepalive", "300", Int, Mutable),
    p("timeout", "0", Int, Mutable),
    p("tls-auth-clients", "yes", Bool, Mutable),
    p("tls-ca-cert-dir", "", Text, Mutable),
    p("tls-ca-cert-file", "", Text, Mutable),
    p("tls-cert-file", "", Text, Mutable),
    p("tls-ciphers", "", Text, Mutable),
    p("tls-ciphersuites", "", Text, Mutable),
    p("tls-client-cert-file", "", Text, Mutable),
    p("tls-client-key-file", "", Text, Mutable),
    p("tls-client-key-file-pass", "", Text, Mutable),
    p("tls-cluster", "no", Bool, Mutable),
    p("tls-dh-params-file", "", Text, Mutable),
    p("tls-key-file", "", Text, Mutable),
    p("tls-key-file-pass", "", Text, Mutable),
    p("tls-port", "0", Int, Mutable),
    p("tls-prefer-server-ciphers", "no", Bool, Mutable),
    p("tls-protocols", "", Text, Mutable),
    p("tls-replication", "no", Bool, Mutable),
    p("tls-session-cache-size", "20480", Int, Mutable),
    p("tls-session-cache-timeout", "300", Int, Mutable),
    p("tls-session-caching", "yes", Bool, Mutable),
    p("tracking-table-max-keys", "1000000", Int, Mutable),
    p("unixsocket", "", Text, Immutable),
    p("unixsocketperm", "0", Int, Immutable),
    p("zset-max-listpack-entries", "128", Int, Mutable),
    p("zset-max-listpack-value", "64", Mem, Mutable),
];

/// Old names Redis still takes, and the parameter each names.
pub const ALIASES: &[(&str, &str)] = &[
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-priority", "replica-priority"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slaveof", "replicaof"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
];

/// The parameter named `name` (any case, aliases too), and the name it was
/// asked by.
pub fn param(name: &[u8]) -> Option<&'static Param> {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    let canonical = ALIASES
        .iter()
        .find(|(a, _)| *a == lower)
        .map_or(lower.as_str(), |(_, c)| c);
    PARAMS.iter().find(|p| p.name == canonical)
}

/// Why `CONFIG SET` refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No such parameter, or an odd number of arguments.
    #[error("ERR Unknown option or number of arguments for CONFIG SET - '{0}'")]
    Unknown(String),
    /// A value the parameter refuses.
    #[error("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")]
    Refused {
        /// The parameter, as asked.
        name: String,
        /// Redis's reason.
        why: String,
    },
}

/// A member's configuration: the value of every parameter.
#[derive(Debug, Clone)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            values: PARAMS
                .iter()
                .map(|p| (p.name, p.default.to_string()))
                .collect(),
        }
    }
}

impl Config {
    /// The value of parameter `name` (canonical name).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// A memory or integer parameter as a number (0 if it is not one).
    pub fn number(&self, name: &str) -> u64 {
        self.get(name).and_then(parse_memory).unwrap_or(0)
    }

    /// Sets a parameter at start (`xlane kv serve --requirepass` ...),
    /// immutable ones included; checked as `CONFIG SET` checks.
    pub fn set_at_start(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let p = param(name.as_bytes()).ok_or_else(|| ConfigError::Unknown(name.into()))?;
        let v = check(p, name, value)?;
        let v = self.merged(p, v);
        self.values.insert(p.name, v);
        Ok(())
    }

    /// `CONFIG GET pattern [pattern ...]`: every parameter (and alias) a
    /// glob pattern matches, any case, each once, as name/value pairs.
    pub fn matching(&self, patterns: &[Vec<u8>]) -> Vec<(String, String)> {
        let names = PARAMS
            .iter()
            .map(|p| (p.name, p.name))
            .chain(ALIASES.iter().copied());
        let mut out: BTreeMap<String, String> = BTreeMap::new();
        for (asked, canonical) in names {
            if patterns
                .iter()
                .any(|pat| glob_match(pat, asked.as_bytes(), true))
            {
                let v = self.get(canonical).unwrap_or("").to_string();
                out.insert(asked.to_string(), v);
            }
        }
        out.into_iter().collect()
    }

    /// `CONFIG SET name value [name value ...]`: all or nothing, as Redis.
    /// Returns the canonical names changed.
    pub fn set(&mut self, pairs: &[Vec<u8>]) -> Result<Vec<&'static str>, ConfigError> {
        if pairs.is_empty() || pairs.len() % 2 != 0 {
            let name = pairs
                .first()
                .map(|n| String::from_utf8_lossy(n).into_owned());
            return Err(ConfigError::Unknown(name.unwrap_or_default()));
        }
        let mut staged: Vec<(&'static str, String)> = Vec::new();
        for pair in pairs.chunks_exact(2) {
            let asked = String::from_utf8_lossy(&pair[0]).into_owned();
            let p = param(&pair[0]).ok_or_else(|| ConfigError::Unknown(asked.clone()))?;
            let refused = |why: &str| ConfigError::Refused {
                name: asked.clone(),
                why: why.into(),
            };
            match p.mutability {
                Immutable => return Err(refused("can't set immutable config")),
                Protected => return Err(refused("can't set protected config")),
                Mutable => {}
            }
            if staged.iter().any(|(n, _)| *n == p.name) {
                return Err(refused("duplicate parameter"));
            }
            let value = String::from_utf8_lossy(&pair[1]).into_owned();
            let v = check(p, &asked, &value)?;
            staged.push((p.name, self.merged(p, v)));
        }
        let names = staged.iter().map(|(n, _)| *n).collect();
        for (n, v) in staged {
            self.values.insert(n, v);
        }
        Ok(names)
    }
}

impl Config {
    /// A checked value as it is kept: for buffer limits, the classes it
    /// names set over the current ones.
    fn merged(&self, p: &Param, v: String) -> String {
        match p.kind {
            BufferLimits => self.output_limits().merged(&v).map_or(v, |l| l.text()),
            _ => v,
        }
    }

    /// The client limits as this configuration sets them.
    pub fn client_limits(&self) -> ClientLimits {
        ClientLimits {
            maxclients: usize::try_from(self.number("maxclients")).unwrap_or(usize::MAX),
            timeout: self.number("timeout"),
            output: self.output_limits(),
        }
    }

    /// `client-output-buffer-limit` as the loop enforces it.
    pub fn output_limits(&self) -> OutputLimits {
        let d = OutputLimits::default();
        self.get("client-output-buffer-limit")
            .and_then(|t| d.merged(t).ok())
            .unwrap_or(d)
    }
}

/// Checks `value` for `p` (asked as `asked`); the value as it is kept.
fn check(p: &Param, asked: &str, value: &str) -> Result<String, ConfigError> {
    let refused = |why: String| ConfigError::Refused {
        name: asked.into(),
        why,
    };
    match p.kind {
        Bool => match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.into()),
            _ => Err(refused("argument must be 'yes' or 'no'".into())),
        },
        Int => match value.parse::<i64>() {
            Ok(n) => Ok(n.to_string()),
            Err(_) => Err(refused(
                "argument couldn't be parsed into an integer".into(),
            )),
        },
        Mem => match parse_memory(value) {
            Some(n) => Ok(n.to_string()),
            None => Err(refused("argument must be a memory value".into())),
        },
        MemOrPercent => {
            if let Some(pct) = value.strip_suffix('%') {
                return match pct.parse::<u8>() {
                    Ok(n) if n <= 100 => Ok(format!("{n}%")),
                    _ => Err(refused("argument must be a memory or percent value".into())),
                };
            }
            parse_memory(value)
                .map(|n| n.to_string())
                .ok_or_else(|| refused("argument must be a memory or percent value".into()))
        }
        Enum(words) => {
            let lower = value.to_ascii_lowercase();
            if words.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err(refused(format!(
                    "argument(s) must be one of the following: {}",
                    words.join(", ")
                )))
            }
        }
        Save => {
            let words: Vec<&str> = value.split_whitespace().collect();
            if words.len() % 2 != 0 || words.iter().any(|w| w.parse::<u64>().is_err()) {
                return Err(refused("Invalid save parameters".into()));
            }
            Ok(words.join(" "))
        }
        Notify => match NotifyFlags::parse(value.as_bytes()) {
            Ok(f) => Ok(f.to_string()),
            Err(_) => Err(refused(
                "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into(),
            )),
        },
        BufferLimits => match OutputLimits::default().merged(value) {
            Ok(_) => Ok(value.into()),
            Err(e) => Err(refused(e.to_string())),
        },
        Text => Ok(value.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Vec<u8>> {
        s.split_whitespace()
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    /// `client-output-buffer-limit`: a set changes the classes it names;
    /// a malformed value is refused with Redis's words and changes none.
    #[test]
    fn output_buffer_limits_merge_by_class() {
        let name = b"client-output-buffer-limit".to_vec();
        let mut c = Config::default();
        let set = |c: &mut Config, v: &str| c.set(&[name.clone(), v.as_bytes().to_vec()]);
        assert!(set(&mut c, "pubsub 1mb 512kb 10").is_ok());
        assert_eq!(
            c.get("client-output-buffer-limit"),
            Some("normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 10")
        );
        assert_eq!(
            set(&mut c, "pubsub 1mb").map_err(|e| e.to_string()),
            Err("ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Wrong number of arguments in buffer limit configuration.".into())
        );
        assert!(set(&mut c, "normal 1kb 0 0").is_ok());
        assert_eq!(c.output_limits().normal.hard, 1024);
        assert_eq!(c.output_limits().pubsub.hard, 1 << 20);
    }

    /// (CONFIG SET words, the reply Redis 7.0.15 gives, then CONFIG GET of
    /// the first parameter).
    #[test]
    fn set_and_get_as_redis() {
        let table: &[(&str, Result<(), &str>, &str)] = &[
            ("hz 5", Ok(()), "5"),
            ("maxmemory 1gb", Ok(()), "1073741824"),
            ("zset-max-ziplist-entries 16", Ok(()), "16"),
            ("zset-max-listpack-entries 32", Ok(()), "32"),
            ("maxmemory-clients 5%", Ok(()), "5%"),
            ("notify-keyspace-events KEA", Ok(()), "AKE"),
            ("activerehashing YES", Ok(()), "yes"),
            ("maxmemory-policy foo", Err("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"), "noeviction"),
            ("maxmemory foo", Err("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"), "0"),
            ("hz abc", Err("ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"), "10"),
            ("activerehashing maybe", Err("ERR CONFIG SET failed (possibly related to argument 'activerehashing') - argument must be 'yes' or 'no'"), "yes"),
            ("nosuch 1", Err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"), ""),
            ("daemonize no", Err("ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"), "no"),
            ("dir /", Err("ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"), ""),
            ("hz 5 hz 6", Err("ERR CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter"), "10"),
            ("hz 7 maxmemory x", Err("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"), "10"),
        ];
        for (line, want, after) in table {
            let mut c = Config::default();
            let w = words(line);
            let got = c.set(&w).map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(String::from), "{line}");
            let name = String::from_utf8_lossy(&w[0]).into_owned();
            let got = c.matching(&[w[0].clone()]);
            let v = got
                .iter()
                .find(|(n, _)| *n == name)
                .map_or("", |(_, v)| v.as_str());
            assert_eq!(v, *after, "{line}: CONFIG GET {name}");
        }
    }

    #[test]
    fn get_takes_globs_and_aliases() {
        let c = Config::default();
        let got = c.matching(&words("zset-max-*-entries"));
        assert_eq!(
            got,
            vec![
                ("zset-max-listpack-entries".to_string(), "128".to_string()),
                ("zset-max-ziplist-entries".to_string(), "128".to_string()),
            ]
        );
        assert!(c.matching(&words("*")).len() > 180);
        assert_eq!(parse_memory("5mb"), Some(5 << 20));
        assert_eq!(parse_memory("-1"), None);
    }
}
