//! Topology parsing and validation.

use xlane_te::topology::{NodeKind, Topology, TopologyError};

const FIXTURE: &str = include_str!("data/testbed_star4.toml");

#[test]
fn parses_real_testbed_export() {
    let t = Topology::from_toml(FIXTURE).expect("fixture parses");
    assert_eq!(t.nodes().len(), 5);
    assert_eq!(t.links().len(), 8);
    assert_eq!(t.hosts().count(), 4);
    let sw = t.node_id("sw").expect("sw");
    assert_eq!(t.node(sw).kind, NodeKind::Switch);
    let l = t.link(t.link_between("h0", "sw").expect("h0->sw"));
    assert_eq!(l.bandwidth_bps, 1_000_000_000);
    assert_eq!(l.express_queue_pkts, 64);
    assert_eq!(l.best_effort_queue_pkts, 1000);
    assert_eq!(l.min_latency_ns, 2339);
    assert_eq!(l.max_jitter_ns, 8581);
    assert_eq!(
        t.describe_link(t.link_between("sw", "h3").expect("l")),
        "sw -> h3"
    );
}

#[test]
fn reads_file() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/testbed_star4.toml");
    assert_eq!(Topology::from_file(&p).expect("file").links().len(), 8);
    let err = Topology::from_file(std::path::Path::new("/nonexistent/x.toml")).unwrap_err();
    assert!(matches!(err, TopologyError::Io { .. }), "{err}");
}

const NODES: &str = r#"
schema = 1
[[node]]
name = "a"
kind = "host"
[[node]]
name = "b"
kind = "host"
[[node]]
name = "sw"
kind = "switch"
"#;

fn link(from: &str, to: &str, extra: &str) -> String {
    format!("[[link]]\nfrom = \"{from}\"\nto = \"{to}\"\n{extra}\n")
}

fn ok_link(from: &str, to: &str) -> String {
    link(from, to, "bandwidth_bps = 1000\nexpress_queue_pkts = 4")
}

fn full(extra_links: &str) -> String {
    format!(
        "{NODES}{}{}{}{}{extra_links}",
        ok_link("a", "sw"),
        ok_link("sw", "a"),
        ok_link("b", "sw"),
        ok_link("sw", "b")
    )
}

#[test]
fn minimal_valid() {
    let t = Topology::from_toml(&full("")).expect("valid");
    let l = t.link(t.link_between("a", "sw").expect("l"));
    assert_eq!((l.min_latency_ns, l.max_jitter_ns), (0, 0));
}

/// (name, toml, expected error substring)
fn bad_cases() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "schema 2",
            full("").replace("schema = 1", "schema = 2"),
            "unsupported topology schema 2",
        ),
        (
            "no schema",
            full("").replace("schema = 1", ""),
            "no `schema` key",
        ),
        (
            "unknown node",
            full(&ok_link("a", "zz")),
            "link #4 (a -> zz): unknown node `zz`",
        ),
        (
            "duplicate node",
            full("[[node]]\nname = \"a\"\nkind = \"switch\"\n"),
            "duplicate node `a`",
        ),
        (
            "unknown kind",
            full("[[node]]\nname = \"r\"\nkind = \"router\"\n"),
            "node `r`: unknown kind `router`",
        ),
        (
            "negative bandwidth",
            full(&link(
                "a",
                "b",
                "bandwidth_bps = -5\nexpress_queue_pkts = 4",
            )),
            "link #4 (a -> b): field `bandwidth_bps` = -5 is out of range",
        ),
        (
            "missing bandwidth",
            full(&link("a", "b", "express_queue_pkts = 4")),
            "link #4 (a -> b): missing field `bandwidth_bps`",
        ),
        (
            "zero bandwidth",
            full(&link("a", "b", "bandwidth_bps = 0\nexpress_queue_pkts = 4")),
            "link #4 (a -> b): bandwidth_bps must be > 0",
        ),
        (
            "negative latency",
            full(&link(
                "a",
                "b",
                "bandwidth_bps = 1\nexpress_queue_pkts = 4\nmin_latency_ns = -1",
            )),
            "field `min_latency_ns` = -1",
        ),
        (
            "self loop",
            full(&ok_link("sw", "sw")),
            "link #4 (sw -> sw): self-loop",
        ),
        (
            "duplicate link",
            full(&ok_link("a", "sw")),
            "link #4 (a -> sw): duplicate",
        ),
        (
            "disconnected",
            format!(
                "{NODES}{}{}{}",
                ok_link("a", "sw"),
                ok_link("sw", "a"),
                ok_link("b", "sw")
            ),
            "host `a` has no path to host `b`",
        ),
        (
            "path through a host only",
            format!("{NODES}{}{}", ok_link("a", "b"), ok_link("b", "a")) + &ok_link("sw", "a"),
            "",
        ),
        ("not toml", "schema = = 1".to_string(), "topology TOML"),
    ]
}

#[test]
fn refusals_name_the_entry() {
    for (name, text, want) in bad_cases() {
        match Topology::from_toml(&text) {
            Ok(_) if want.is_empty() => {}
            Ok(_) => panic!("{name}: accepted"),
            Err(e) => {
                let msg = e.to_string();
                assert!(!want.is_empty(), "{name}: refused: {msg}");
                assert!(msg.contains(want), "{name}: got `{msg}`, want `{want}`");
            }
        }
    }
}

#[test]
fn hosts_do_not_forward() {
    // a -> c only via host b: refused.
    let text = r#"
schema = 1
[[node]]
name = "a"
kind = "host"
[[node]]
name = "b"
kind = "host"
[[node]]
name = "c"
kind = "host"
[[link]]
from = "a"
to = "b"
bandwidth_bps = 1
express_queue_pkts = 1
[[link]]
from = "b"
to = "c"
bandwidth_bps = 1
express_queue_pkts = 1
"#;
    let e = Topology::from_toml(text).unwrap_err();
    assert!(matches!(e, TopologyError::Disconnected { .. }), "{e}");
}
