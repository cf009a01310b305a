use super::*;
use crate::config::TestbedConfig;
use crate::shaping::htb_lines;

fn policy() -> TunnelPolicy {
    TunnelPolicy {
        tunnel: 4,
        sublane: 0,
        rate_bps: 2_000_000,
        burst_bytes: 4000,
        queue_pkts: 16,
        sender: 0,
        ports: vec![1, 2],
    }
}

#[test]
fn slots_name_everything() {
    let table: &[(u32, u16, &str, &str, &str)] = &[
        (0, 1, "1:1001", "1001:", "800::1"),
        (4, 5, "1:1005", "1005:", "800::5"),
        (2046, 0x7ff, "1:17ff", "17ff:", "800::7ff"),
        (2047, 1, "1:1001", "1001:", "800::1"),
        (u32::MAX, (u32::MAX % 2047) as u16 + 1, "", "", ""),
    ];
    for &(tunnel, slot, cid, qh, fh) in table {
        let s = TunnelSlot::preferred(tunnel);
        assert_eq!(s.get(), slot, "tunnel {tunnel}");
        assert!(TunnelSlot::new(s.get()).is_some());
        if !cid.is_empty() {
            assert_eq!(s.class_id(), cid);
            assert_eq!(s.qdisc_handle(), qh);
            assert_eq!(s.filter_handle("800"), fh);
        }
    }
    assert!(TunnelSlot::new(0).is_none());
    assert!(TunnelSlot::new(0x800).is_none());
    // Never the ids of the shaping classes, and node ids stay below
    // the DSCP filter's automatic 0x800.
    for n in 1..=MAX_SLOTS {
        let s = TunnelSlot(n);
        for fixed in ["1:1", "1:10", "1:20", "1:30"] {
            assert_ne!(s.class_id(), fixed);
        }
        for fixed in ["10:", "20:", "30:", "1:"] {
            assert_ne!(s.qdisc_handle(), fixed);
        }
        assert_ne!(s.filter_handle("800"), "800::800");
    }
}

#[test]
fn allocation_probes_and_wraps() {
    let table: &[(u32, &[u16], Option<u16>)] = &[
        (4, &[], Some(5)),
        (4, &[5], Some(6)),
        (4, &[5, 6, 7], Some(8)),
        (2046, &[0x7ff], Some(1)),
        (2046, &[0x7ff, 1, 2], Some(3)),
    ];
    for &(tunnel, taken, want) in table {
        let got = allocate_slot(tunnel, |s| taken.contains(&s.get())).map(TunnelSlot::get);
        assert_eq!(got, want, "tunnel {tunnel} taken {taken:?}");
    }
    assert_eq!(allocate_slot(9, |_| true), None);
}

#[test]
fn install_lines_are_exact() {
    let p = policy();
    let l = install_lines("xl1-h0", "800", TunnelSlot(5), &p);
    assert_eq!(
        l,
        vec![
            "class add dev xl1-h0 parent 1:1 classid 1:1005 htb rate 2mbit ceil 2mbit \
             burst 4000b cburst 4000b prio 0 quantum 1514"
                .to_string(),
            "qdisc add dev xl1-h0 parent 1:1005 handle 1005: pfifo limit 16".to_string(),
            "filter add dev xl1-h0 parent 1: protocol ip prio 1 handle 800::5 u32 \
             match u8 0x45 0xff at 0 match u16 0x0000 0x1fff at 6 match u8 0x11 0xff at 9 \
             match u16 0x584c 0xffff at 28 match u32 0x00000004 0xffffffff at 36 flowid 1:1005"
                .to_string(),
        ]
    );
    let q = TunnelPolicy {
        sublane: 1,
        rate_bps: 1_500_001,
        burst_bytes: 100,
        tunnel: 0xdead_beef,
        ..policy()
    };
    let all = install_lines("p1", "801", TunnelSlot(0x7ff), &q).join("\n");
    for want in [
        "rate 1500001bit ceil 1500001bit",
        "burst 1514b cburst 1514b prio 1",
        "classid 1:17ff",
        "handle 801::7ff",
        "match u32 0xdeadbeef 0xffffffff at 36",
        "flowid 1:17ff",
    ] {
        assert!(all.contains(want), "missing {want} in\n{all}");
    }
}

#[test]
fn steer_and_remove_lines() {
    let s = TunnelSlot(5);
    let m = tunnel_match(4);
    let table: &[(Steer<'_>, String)] = &[
        (
            Steer::Own,
            format!("filter replace dev d parent 1: protocol ip prio 1 handle 800::5 u32 {m} flowid 1:1005"),
        ),
        (
            Steer::BestEffort { tap: None },
            format!("filter replace dev d parent 1: protocol ip prio 1 handle 800::5 u32 {m} flowid 1:30"),
        ),
        (
            Steer::BestEffort { tap: Some("xltap") },
            format!(
                "filter replace dev d parent 1: protocol ip prio 1 handle 800::5 u32 {m} flowid 1:30 \
                 action mirred egress mirror dev xltap"
            ),
        ),
    ];
    for (to, want) in table {
        assert_eq!(&steer_line("d", "800", s, 4, *to), want);
    }
    assert_eq!(
        remove_lines("d", "800", s),
        vec![
            "filter del dev d parent 1: protocol ip prio 1 handle 800::5 u32".to_string(),
            "class del dev d classid 1:1005".to_string(),
        ]
    );
}

#[test]
fn express_queue_lines() {
    let table: &[(u8, u32, Result<&str, PolicyError>)] = &[
        (
            0,
            7,
            Ok("qdisc change dev p0 parent 1:10 handle 10: pfifo limit 7"),
        ),
        (
            1,
            300,
            Ok("qdisc change dev p0 parent 1:20 handle 20: pfifo limit 300"),
        ),
        (2, 7, Err(PolicyError::Sublane(2))),
        (0, 0, Err(PolicyError::ZeroQueue)),
    ];
    for (sub, pkts, want) in table {
        assert_eq!(
            express_queue_line("p0", *sub, *pkts),
            want.clone().map(str::to_string),
            "{sub} {pkts}"
        );
    }
}

#[test]
fn validation() {
    let ok = policy();
    let link = 1_000_000_000;
    assert_eq!(ok.validate(4, true, link), Ok(()));
    let table: Vec<(TunnelPolicy, bool, PolicyError)> = vec![
        (
            TunnelPolicy {
                sublane: 1,
                ..ok.clone()
            },
            false,
            PolicyError::Sublane(1),
        ),
        (
            TunnelPolicy {
                sublane: 2,
                ..ok.clone()
            },
            true,
            PolicyError::Sublane(2),
        ),
        (
            TunnelPolicy {
                rate_bps: 0,
                ..ok.clone()
            },
            true,
            PolicyError::ZeroRate(4),
        ),
        (
            TunnelPolicy {
                rate_bps: link + 1,
                ..ok.clone()
            },
            true,
            PolicyError::RateAboveLink {
                tunnel: 4,
                rate_bps: link + 1,
                link_bps: link,
            },
        ),
        (
            TunnelPolicy {
                queue_pkts: 0,
                ..ok.clone()
            },
            true,
            PolicyError::ZeroQueue,
        ),
        (
            TunnelPolicy {
                rate_bps: 8,
                burst_bytes: 100,
                ..ok.clone()
            },
            true,
            PolicyError::BurstTooLong {
                tunnel: 4,
                burst_bytes: 100,
                rate_bps: 8,
            },
        ),
        (
            TunnelPolicy {
                sender: 4,
                ..ok.clone()
            },
            true,
            PolicyError::BadHost { index: 4, hosts: 4 },
        ),
        (
            TunnelPolicy {
                ports: vec![1, 9],
                ..ok.clone()
            },
            true,
            PolicyError::BadHost { index: 9, hosts: 4 },
        ),
        (
            TunnelPolicy {
                ports: vec![0],
                ..ok.clone()
            },
            true,
            PolicyError::PortIsSender { tunnel: 4, port: 0 },
        ),
        (
            TunnelPolicy {
                ports: vec![2, 1, 2],
                ..ok.clone()
            },
            true,
            PolicyError::DuplicatePort { tunnel: 4, port: 2 },
        ),
    ];
    for (p, e2, want) in table {
        assert_eq!(p.validate(4, e2, link), Err(want.clone()), "{p:?}");
    }
    let sender_only = TunnelPolicy {
        ports: vec![],
        ..ok.clone()
    };
    assert_eq!(sender_only.validate(4, true, link), Ok(()));
    assert_eq!(sender_only.places(), vec![Place::Host(0)]);
    assert_eq!(
        ok.places(),
        vec![Place::Host(0), Place::SwitchPort(1), Place::SwitchPort(2)]
    );
    // 8 kbit/s with 60 kB: exactly 60 s is still fine.
    let slow = TunnelPolicy {
        rate_bps: 8_000,
        burst_bytes: 60_000,
        ..ok
    };
    assert_eq!(slow.validate(4, true, link), Ok(()));
}

/// Output of `tc filter show` on a shaped device with one tunnel.
const FILTERS: &str = "\
filter parent 1: protocol ip pref 1 u32 chain 0 
filter parent 1: protocol ip pref 1 u32 chain 0 fh 800: ht divisor 1 
filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::5 order 5 key ht 800 bkt 0 *flowid 1:30 not_in_hw 
  match 45000000/ff000000 at 0
  match 00000000/00001fff at 4
  match 00110000/00ff0000 at 8
  match 584c0000/ffff0000 at 28
  match 00000007/ffffffff at 36
\taction order 1: mirred (Egress Mirror to device xltap) pipe
\tindex 1 ref 1 bind 1 installed 0 sec used 0 sec firstused 0 sec
\tAction statistics:
\tSent 121000 bytes 500 pkt (dropped 0, overlimits 500 requeues 0) 
\tbacklog 0b 0p requeues 0

filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 *flowid 1:10 not_in_hw 
  match 00b80000/00fc0000 at 0
filter parent 1: protocol ip pref 2 u32 chain 0 
filter parent 1: protocol ip pref 2 u32 chain 0 fh 801: ht divisor 1 
filter parent 1: protocol ip pref 2 u32 chain 0 fh 801::800 order 2048 key ht 801 bkt 0 *flowid 1:20 not_in_hw 
  match 00a00000/00fc0000 at 0
filter parent 1: protocol arp pref 3 u32 chain 0 
filter parent 1: protocol arp pref 3 u32 chain 0 fh 802: ht divisor 1 
filter parent 1: protocol arp pref 3 u32 chain 0 fh 802::800 order 2048 key ht 802 bkt 0 *flowid 1:10 not_in_hw 
  match 00000000/00000000 at 0
";

#[test]
fn parses_htids() {
    let table: &[(&str, u32, Option<&str>)] = &[
        (FILTERS, 1, Some("800")),
        (FILTERS, 2, Some("801")),
        (FILTERS, 3, None), // protocol arp
        (FILTERS, 9, None),
        ("", 1, None),
        (
            "filter parent 1: protocol ip pref 1 u32 chain 0 fh",
            1,
            None,
        ),
        (
            "filter parent 1: protocol ip pref 1 u32 chain 0 fh : ht divisor 1",
            1,
            None,
        ),
    ];
    for &(text, pref, want) in table {
        assert_eq!(parse_root_htid(text, pref).as_deref(), want, "pref {pref}");
    }
}

#[test]
fn parses_filter_counters() {
    let c = parse_filter_counters(FILTERS, "800::5").unwrap();
    assert_eq!(c.hits, None);
    assert_eq!(
        c.action,
        Some(Counts {
            packets: 500,
            bytes: 121000
        })
    );
    let plain = parse_filter_counters(FILTERS, "800::800").unwrap();
    assert_eq!(plain, FilterCounters::default());
    assert!(parse_filter_counters(FILTERS, "800::50").is_none());
    assert!(parse_filter_counters(FILTERS, "800::").is_none());
    // A kernel with CONFIG_CLS_U32_PERF prints hit counters.
    let perf = "filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::5 order 5 key ht 800 bkt 0 flowid 1:1005 \n  (rule hit 812 success 40)\n  match 45000000/ff000000 at 0 (success 700 ) \n";
    assert_eq!(
        parse_filter_counters(perf, "800::5"),
        Some(FilterCounters {
            hits: Some(40),
            action: None
        })
    );
    // Garbage is no panic.
    for g in [
        "filter fh 800::5\n Sent x bytes y pkt",
        "filter fh 800::5\n (rule hit",
        "Sent",
    ] {
        let _ = parse_filter_counters(g, "800::5");
    }
}

#[test]
fn used_ids() {
    let classes = "class htb 1:1 root rate 1Gbit ceil 1Gbit burst 6250b cburst 6250b \n\
                   class htb 1:1005 parent 1:1 leaf 1005: prio 0 rate 1Mbit ceil 1Mbit burst 3028b cburst 3028b \n";
    let qdiscs =
        "qdisc htb 1: root refcnt 2 r2q 10 default 0x30 direct_packets_stat 0 direct_qlen 1000\n\
                  qdisc pfifo 1005: parent 1:1005 limit 16p\n";
    let u = UsedIds::parse(classes, qdiscs, FILTERS);
    assert!(u.classes.contains("1:1005"));
    assert!(u.qdiscs.contains("1005:"));
    assert!(u.filters.contains("800::5") && u.filters.contains("800:"));
    assert!(u.uses(TunnelSlot(5), "800"));
    assert!(!u.uses(TunnelSlot(6), "800"));
    // Only the filter handle taken (class and qdisc free).
    let f = UsedIds::parse("", "", FILTERS);
    assert!(f.uses(TunnelSlot(5), "800"));
    assert!(!f.uses(TunnelSlot(5), "801"));
}

#[test]
fn shares_the_express_filter_table() {
    // The tunnel filters rely on the express DSCP filter being the
    // pref-1 ip filter of the shaping.
    let cfg = TestbedConfig::default();
    let l = htb_lines("p0", 1_000_000_000, &cfg);
    assert!(
        l.iter().any(|x| x.contains(&format!(
            "protocol ip prio {EXPRESS_FILTER_PREF} u32 match ip tos"
        ))),
        "{l:?}"
    );
}

#[test]
fn tap_lines() {
    assert_eq!(
        tap_ip_lines(),
        vec!["link add name xltap type ifb", "link set dev xltap up"]
    );
    assert_eq!(
        tap_tc_lines(),
        vec!["qdisc replace dev xltap root pfifo limit 0"]
    );
}

#[test]
fn policy_errors_map_to_testbed_errors() {
    let e: TestbedError = PolicyError::BadHost { index: 5, hosts: 2 }.into();
    assert!(matches!(e, TestbedError::BadHost { index: 5, hosts: 2 }));
    let e: TestbedError = PolicyError::NotInstalled(3).into();
    assert!(e.to_string().contains("tunnel 3 has no policy"), "{e}");
}
