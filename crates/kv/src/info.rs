//! `INFO`: every section Redis 7.0 has, in its order and form (`# Name`,
//! `field:value` lines, a blank line between sections), with the fields
//! clients and tools read. What xlane kv has no counterpart for (forks, an
//! AOF, Redis replication) reads as idle; the member's Raft facts are in
//! `Replication` and `Cluster`, and in `xlane_*` fields.

use crate::store::Store;

/// The Redis version xlane kv answers as (`INFO`, `redis.REDIS_VERSION`).
pub const REDIS_VERSION: &str = "7.0.15";

/// What the member knows beside its store.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// A member of a group of several (Redis Cluster mode).
    pub cluster: bool,
    /// This member leads its group.
    pub leader: bool,
    /// The leader's client address, if known and not this member.
    pub leader_addr: Option<String>,
    /// Members of the group.
    pub members: usize,
    /// The client port.
    pub tcp_port: u16,
    /// Open client connections.
    pub connected_clients: usize,
    /// Clients blocked on keys or timers.
    pub blocked_clients: usize,
    /// Clients subscribed to something.
    pub pubsub_clients: usize,
    /// Channels and patterns subscribed to.
    pub pubsub_channels: usize,
    /// Patterns subscribed to.
    pub pubsub_patterns: usize,
    /// Shard channels subscribed to.
    pub pubsubshard_channels: usize,
    /// Connections accepted since start.
    pub total_connections: u64,
    /// Connections refused past `maxclients` since start.
    pub rejected_connections: u64,
    /// Clients closed past their output buffer limit since start.
    pub output_limit_closed: u64,
    /// `maxclients` as the loop enforces it.
    pub maxclients: usize,
    /// Commands answered since start.
    pub total_commands: u64,
    /// Calls per command since start (name, calls), for `Commandstats`.
    pub calls: Vec<(&'static str, u64)>,
    /// Connections with `CLIENT TRACKING` on.
    pub tracking_clients: usize,
    /// Keys remembered for them.
    pub tracking_keys: usize,
    /// Key-reader pairs remembered.
    pub tracking_items: usize,
    /// `BCAST` prefixes.
    pub tracking_prefixes: usize,
}

/// Sections in order, and whether `INFO` (no argument, `default`) shows
/// each.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("errorstats", true),
    ("cluster", true),
    ("keyspace", true),
    ("commandstats", false),
    ("latencystats", false),
];

/// Seconds since the process started.
fn uptime_s() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs()
}

/// Resident bytes of this process.
/// The memory this process uses, as `INFO`'s `used_memory` reports it
/// and `maxmemory` is compared with: its resident set.
pub fn used_memory() -> u64 {
    rss_bytes()
}

fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * 4096
}

/// (user, system) CPU seconds of this process.
fn cpu_s() -> (f64, f64) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: a valid pointer to a rusage the call fills.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } != 0 {
        return (0.0, 0.0);
    }
    // SAFETY: getrusage succeeded and filled it.
    let ru = unsafe { ru.assume_init() };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn section(name: &str, store: &Store, now_ms: u64, f: &Facts) -> String {
    let mut s = String::new();
    let mut kv = |k: &str, v: String| {
        s.push_str(k);
        s.push(':');
        s.push_str(&v);
        s.push_str("\r\n");
    };
    match name {
        "server" => {
            kv("redis_version", REDIS_VERSION.into());
            kv("redis_git_sha1", "00000000".into());
            kv("redis_git_dirty", "0".into());
            kv("redis_build_id", "0".into());
            kv(
                "redis_mode",
                if f.cluster { "cluster" } else { "standalone" }.into(),
            );
            kv("os", "Linux".into());
            kv("arch_bits", "64".into());
            kv("multiplexing_api", "epoll".into());
            kv("process_id", std::process::id().to_string());
            kv("tcp_port", f.tcp_port.to_string());
            kv("uptime_in_seconds", uptime_s().to_string());
            kv("uptime_in_days", (uptime_s() / 86400).to_string());
            kv("hz", "10".into());
            kv("executable", "xlane".into());
            kv("xlane_kv", env!("CARGO_PKG_VERSION").into());
        }
        "clients" => {
            kv("connected_clients", f.connected_clients.to_string());
            kv("cluster_connections", "0".into());
            kv("maxclients", f.maxclients.to_string());
            kv("blocked_clients", f.blocked_clients.to_string());
            kv("tracking_clients", f.tracking_clients.to_string());
            kv("clients_in_timeout_table", f.blocked_clients.to_string());
        }
        "memory" => {
            let rss = rss_bytes();
            kv("used_memory", rss.to_string());
            kv("used_memory_rss", rss.to_string());
            kv("used_memory_peak", rss.to_string());
            kv("maxmemory", "0".into());
            kv("maxmemory_policy", "noeviction".into());
            kv("mem_not_counted_for_evict", "0".into());
            kv("mem_allocator", "libc".into());
            kv(
                "number_of_cached_scripts",
                store.scripts().cached().to_string(),
            );
            kv(
                "number_of_functions",
                store.scripts().function_count().to_string(),
            );
        }
        "persistence" => {
            kv("loading", "0".into());
            kv("async_loading", "0".into());
            kv("rdb_changes_since_last_save", store.dirty().to_string());
            kv("rdb_bgsave_in_progress", "0".into());
            kv("rdb_last_bgsave_status", "ok".into());
            kv("aof_enabled", "0".into());
            kv("aof_rewrite_in_progress", "0".into());
            kv("aof_last_bgrewrite_status", "ok".into());
            kv("xlane_raft_log", "durable".into());
        }
        "stats" => {
            kv(
                "total_connections_received",
                f.total_connections.to_string(),
            );
            kv("total_commands_processed", f.total_commands.to_string());
            kv("instantaneous_ops_per_sec", "0".into());
            kv("rejected_connections", f.rejected_connections.to_string());
            kv("expired_keys", store.expired_count().to_string());
            // MIGRATE opens no cached connection: it moves no key between
            // servers here (see docs/kv-commands.md).
            kv("migrate_cached_sockets", "0".into());
            kv("evicted_keys", "0".into());
            kv("keyspace_hits", "0".into());
            kv("keyspace_misses", "0".into());
            kv("pubsub_channels", f.pubsub_channels.to_string());
            kv("pubsub_patterns", f.pubsub_patterns.to_string());
            kv("pubsubshard_channels", f.pubsubshard_channels.to_string());
            kv("total_forks", "0".into());
            kv("tracking_total_keys", f.tracking_keys.to_string());
            kv("tracking_total_items", f.tracking_items.to_string());
            kv("tracking_total_prefixes", f.tracking_prefixes.to_string());
            kv("total_error_replies", "0".into());
            kv(
                "client_output_buffer_limit_disconnections",
                f.output_limit_closed.to_string(),
            );
            kv("xlane_applied_ops", store.applied().to_string());
            kv("xlane_leader_term", store.leader_term().to_string());
            kv("xlane_notify_dropped", store.events_dropped().to_string());
        }
        "replication" => {
            if f.leader || !f.cluster {
                kv("role", "master".into());
                kv("connected_slaves", f.members.saturating_sub(1).to_string());
            } else {
                kv("role", "slave".into());
                let (host, port) = f
                    .leader_addr
                    .as_deref()
                    .and_then(|a| a.rsplit_once(':'))
                    .unwrap_or(("", "0"));
                kv("master_host", host.into());
                kv("master_port", port.into());
                kv(
                    "master_link_status",
                    if f.leader_addr.is_some() {
                        "up"
                    } else {
                        "down"
                    }
                    .into(),
                );
            }
            kv("master_repl_offset", store.applied().to_string());
        }
        "cpu" => {
            let (u, sys) = cpu_s();
            kv("used_cpu_sys", format!("{sys:.6}"));
            kv("used_cpu_user", format!("{u:.6}"));
            kv("used_cpu_sys_children", "0.000000".into());
            kv("used_cpu_user_children", "0.000000".into());
        }
        "cluster" => kv("cluster_enabled", u8::from(f.cluster).to_string()),
        "keyspace" => {
            let keys = store.len(now_ms);
            if keys > 0 {
                let expires = store.expiring(now_ms);
                kv("db0", format!("keys={keys},expires={expires},avg_ttl=0"));
            }
        }
        "commandstats" => {
            for (n, calls) in &f.calls {
                kv(
                    &format!("cmdstat_{n}"),
                    format!(
                        "calls={calls},usec=0,usec_per_call=0.00,rejected_calls=0,failed_calls=0"
                    ),
                );
            }
        }
        _ => {}
    }
    s
}

/// `INFO [section ...]` (lower-case names): the sections asked for (none
/// or `default`: the default ones; `all`, `everything`: every one), each
/// once, in Redis's order.
pub fn text(store: &Store, now_ms: u64, names: &[Vec<u8>], facts: &Facts) -> String {
    let has = |n: &str| names.iter().any(|x| x.as_slice() == n.as_bytes());
    let every = has("all") || has("everything");
    let default = names.is_empty() || has("default");
    SECTIONS
        .iter()
        .filter(|(name, dflt)| every || (default && *dflt) || has(name))
        .map(|(name, _)| {
            let mut title = name.to_string();
            title[..1].make_ascii_uppercase();
            let title = match *name {
                "cpu" => "CPU".to_string(),
                "commandstats" => "Commandstats".into(),
                "errorstats" => "Errorstats".into(),
                "latencystats" => "Latencystats".into(),
                _ => title,
            };
            format!("# {title}\r\n{}", section(name, store, now_ms, facts))
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Vec<u8>> {
        s.split_whitespace()
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    /// The info-command unit's checks: which sections each argument shows.
    #[test]
    fn sections_as_redis() {
        let st = Store::new();
        let f = Facts {
            calls: vec![("info", 1)],
            ..Facts::default()
        };
        let t = |a: &str| text(&st, 0, &words(a), &f);
        for a in ["", "all", "default", "everything"] {
            let i = t(a);
            assert!(
                i.contains("redis_version") && i.contains("used_cpu_user"),
                "{a}"
            );
            assert!(
                i.contains("used_memory") && !i.contains("sentinel_tilt"),
                "{a}"
            );
            assert_eq!(
                i.contains("rejected_calls"),
                a == "all" || a == "everything",
                "{a}"
            );
        }
        let cpu = t("cpu");
        assert!(cpu.contains("used_cpu_user") && !cpu.contains("used_memory"));
        let i = t("cpu all");
        assert_eq!(i.matches("used_cpu_user_children").count(), 1);
        assert!(i.contains("master_repl_offset") && i.contains("rejected_calls"));
        assert!(t("").contains("redis_mode:standalone"));
        assert!(t("").contains("cluster_enabled:0"));
    }
}
