//! Redis Cluster's view of a raft group, for cluster-aware clients.
//!
//! Clients such as Python's `RedisCluster` and the Rust `redis` crate's
//! `ClusterClient` start by asking `CLUSTER SLOTS` (or `CLUSTER NODES`)
//! which node serves which hash slot, send each command to that node and
//! follow `-MOVED <slot> <addr>` when the map changed. An xlane kv group is
//! one shard: every slot (0–16383) is served by the leader, and the other
//! members are its replicas (they serve reads after `READONLY`). So:
//!
//! * `CLUSTER SLOTS` / `CLUSTER SHARDS`: one range, 0–16383, the leader
//!   first, then the other members. A member that knows no leader (an
//!   election is under way) names itself as the master, so the client asks
//!   it and gets `-MOVED` (once the leader is known) or `-TRYAGAIN`.
//! * `CLUSTER NODES`: the same in Redis's line format.
//! * `CLUSTER INFO`, `CLUSTER MYID`, `CLUSTER KEYSLOT`.
//!
//! Node ids are the raft ids written as 40 hexadecimal digits, so they are
//! stable across restarts and readable (`...0003` is member 3).

use crate::members::Members;
use crate::resp::{Command, Reply};

/// A `CLUSTER` subcommand a member answers from its member table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterCmd {
    /// `CLUSTER SLOTS`.
    Slots,
    /// `CLUSTER SHARDS`.
    Shards,
    /// `CLUSTER NODES`.
    Nodes,
    /// `CLUSTER INFO`.
    Info,
    /// `CLUSTER MYID`.
    MyId,
}

/// The last hash slot.
pub const LAST_SLOT: i64 = 16383;

/// Parses `CLUSTER <sub> ...`: a [`ClusterCmd`] to answer from the member
/// table, or the reply at once (`KEYSLOT`, errors).
pub fn parse(args: &Command) -> Result<ClusterCmd, Reply> {
    let sub = args[1].to_ascii_lowercase();
    let arity = |n: usize, name: &str| {
        if args.len() == n {
            Ok(())
        } else {
            Err(crate::cmd::args::arity_error(&format!("cluster|{name}")))
        }
    };
    match sub.as_slice() {
        b"slots" => arity(2, "slots").map(|_| ClusterCmd::Slots),
        b"shards" => arity(2, "shards").map(|_| ClusterCmd::Shards),
        b"nodes" => arity(2, "nodes").map(|_| ClusterCmd::Nodes),
        b"info" => arity(2, "info").map(|_| ClusterCmd::Info),
        b"myid" => arity(2, "myid").map(|_| ClusterCmd::MyId),
        b"keyslot" => {
            arity(3, "keyslot")?;
            Err(Reply::Integer(i64::from(crate::session::hash_slot(
                &args[2],
            ))))
        }
        _ => {
            let s = String::from_utf8_lossy(&args[1][..args[1].len().min(128)]).into_owned();
            Err(Reply::err(format!(
                "ERR unknown subcommand '{s}'. Try CLUSTER HELP."
            )))
        }
    }
}

/// Member `id`'s cluster node id: its raft id as 40 hexadecimal digits.
pub fn node_id(id: u64) -> String {
    format!("{id:040x}")
}

/// A member as the cluster replies name it: id, host and port.
struct Node {
    id: u64,
    host: String,
    port: u16,
}

/// The group's nodes, master first: the leader, or `me` while no leader
/// is known (or the leader is not in the table yet).
fn nodes(members: &Members, me: u64, leader: u64) -> Vec<Node> {
    let table = members.table();
    let master = if table.contains_key(&leader) {
        leader
    } else {
        me
    };
    let mut out: Vec<Node> = table
        .iter()
        .filter_map(|(&id, p)| {
            let (host, port) = p.client.rsplit_once(':')?;
            Some(Node {
                id,
                host: host.trim_start_matches('[').trim_end_matches(']').into(),
                port: port.parse().ok()?,
            })
        })
        .collect();
    out.sort_by_key(|n| (n.id != master, n.id));
    out
}

/// The reply to `cmd` on member `me` of `members`, whose leader is
/// `leader` as far as it knows (0: none).
pub fn reply(cmd: ClusterCmd, members: &Members, me: u64, leader: u64) -> Reply {
    let nodes = nodes(members, me, leader);
    match cmd {
        ClusterCmd::Slots => {
            let mut range = vec![Reply::Integer(0), Reply::Integer(LAST_SLOT)];
            range.extend(nodes.iter().map(|n| {
                Reply::Array(Some(vec![
                    Reply::bulk(n.host.clone()),
                    Reply::Integer(i64::from(n.port)),
                    Reply::bulk(node_id(n.id)),
                ]))
            }));
            Reply::Array(Some(vec![Reply::Array(Some(range))]))
        }
        ClusterCmd::Shards => {
            let node = |n: &Node, i: usize| {
                let kv = |k: &str, v: Reply| [Reply::bulk(k), v];
                let role = if i == 0 { "master" } else { "replica" };
                Reply::Array(Some(
                    [
                        kv("id", Reply::bulk(node_id(n.id))),
                        kv("port", Reply::Integer(i64::from(n.port))),
                        kv("ip", Reply::bulk(n.host.clone())),
                        kv("endpoint", Reply::bulk(n.host.clone())),
                        kv("role", Reply::bulk(role)),
                        kv("replication-offset", Reply::Integer(0)),
                        kv("health", Reply::bulk("online")),
                    ]
                    .into_iter()
                    .flatten()
                    .collect(),
                ))
            };
            Reply::Array(Some(vec![Reply::Array(Some(vec![
                Reply::bulk("slots"),
                Reply::Array(Some(vec![Reply::Integer(0), Reply::Integer(LAST_SLOT)])),
                Reply::bulk("nodes"),
                Reply::Array(Some(
                    nodes.iter().enumerate().map(|(i, n)| node(n, i)).collect(),
                )),
            ]))]))
        }
        ClusterCmd::Nodes => {
            let master = nodes.first().map_or(0, |n| n.id);
            let mut text = String::new();
            for n in &nodes {
                let myself = if n.id == me { "myself," } else { "" };
                let (role, of, slots) = if n.id == master {
                    ("master", "-".to_string(), format!(" 0-{LAST_SLOT}"))
                } else {
                    ("slave", node_id(master), String::new())
                };
                text.push_str(&format!(
                    "{} {}:{}@{} {myself}{role} {of} 0 0 1 connected{slots}\n",
                    node_id(n.id),
                    n.host,
                    n.port,
                    u32::from(n.port) + 10000,
                ));
            }
            Reply::bulk(text)
        }
        ClusterCmd::Info => Reply::bulk(format!(
            "cluster_enabled:1\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n\
             cluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\n\
             cluster_known_nodes:{}\r\ncluster_size:1\r\n",
            nodes.len()
        )),
        ClusterCmd::MyId => Reply::bulk(node_id(me)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::members::Peer;

    fn members(n: u64) -> Members {
        Members::new(
            (1..=n)
                .map(|id| {
                    let peer = Peer {
                        raft: format!("127.0.0.1:{}", 7000 + id).parse().unwrap(),
                        client: format!("127.0.0.1:{}", 6000 + id),
                    };
                    (id, peer)
                })
                .collect(),
        )
    }

    fn cmd(words: &[&str]) -> Command {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    /// The master of `CLUSTER SLOTS`' one range, and the replicas' ports.
    fn slots(me: u64, leader: u64) -> Vec<i64> {
        let Reply::Array(Some(ranges)) = reply(ClusterCmd::Slots, &members(3), me, leader) else {
            panic!("not an array");
        };
        assert_eq!(ranges.len(), 1);
        let Reply::Array(Some(r)) = &ranges[0] else {
            panic!("range")
        };
        assert_eq!(r[..2], [Reply::Integer(0), Reply::Integer(LAST_SLOT)]);
        r[2..]
            .iter()
            .map(|n| match n {
                Reply::Array(Some(f)) => match f[1] {
                    Reply::Integer(p) => p,
                    _ => panic!("port"),
                },
                _ => panic!("node"),
            })
            .collect()
    }

    #[test]
    fn the_leader_serves_every_slot() {
        // (me, leader) -> ports, master first.
        let table: &[(u64, u64, &[i64])] = &[
            (1, 2, &[6002, 6001, 6003]),
            (2, 2, &[6002, 6001, 6003]),
            (3, 1, &[6001, 6002, 6003]),
            // No leader known: the member names itself.
            (3, 0, &[6003, 6001, 6002]),
            // A leader not in the table yet: likewise.
            (1, 9, &[6001, 6002, 6003]),
        ];
        for &(me, leader, want) in table {
            assert_eq!(slots(me, leader), want, "me {me}, leader {leader}");
        }
    }

    #[test]
    fn nodes_lines_name_master_and_replicas() {
        let Reply::Bulk(Some(text)) = reply(ClusterCmd::Nodes, &members(3), 3, 2) else {
            panic!("bulk")
        };
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with(&format!("{} 127.0.0.1:6002@16002 master - ", node_id(2))));
        assert!(lines[0].ends_with(" connected 0-16383"));
        assert!(lines[2].contains(&format!("myself,slave {}", node_id(2))));
    }

    #[test]
    fn subcommands_parse_or_answer() {
        let table: &[(&[&str], Result<ClusterCmd, Reply>)] = &[
            (&["cluster", "SLOTS"], Ok(ClusterCmd::Slots)),
            (&["cluster", "shards"], Ok(ClusterCmd::Shards)),
            (&["cluster", "nodes"], Ok(ClusterCmd::Nodes)),
            (&["cluster", "info"], Ok(ClusterCmd::Info)),
            (&["cluster", "myid"], Ok(ClusterCmd::MyId)),
            // Redis's own examples: KEYSLOT of "somekey" and a hash tag.
            (
                &["cluster", "keyslot", "somekey"],
                Err(Reply::Integer(11058)),
            ),
            (
                &["cluster", "keyslot", "foo{hash_tag}"],
                Err(Reply::Integer(2515)),
            ),
            (
                &["cluster", "slots", "x"],
                Err(Reply::err(
                    "ERR wrong number of arguments for 'cluster|slots' command",
                )),
            ),
            (
                &["cluster", "meet"],
                Err(Reply::err(
                    "ERR unknown subcommand 'meet'. Try CLUSTER HELP.",
                )),
            ),
        ];
        for (words, want) in table {
            assert_eq!(&parse(&cmd(words)), want, "{words:?}");
        }
    }

    #[test]
    fn myid_and_info() {
        assert_eq!(
            reply(ClusterCmd::MyId, &members(3), 3, 1),
            Reply::bulk("0000000000000000000000000000000000000003")
        );
        let Reply::Bulk(Some(info)) = reply(ClusterCmd::Info, &members(3), 3, 1) else {
            panic!("bulk")
        };
        let info = String::from_utf8(info).unwrap();
        assert!(info.contains("cluster_state:ok\r\n"));
        assert!(info.contains("cluster_known_nodes:3\r\n"));
    }
}
