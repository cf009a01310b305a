//! The sans-IO controller core: authorization, validation, TE upcalls,
//! monitoring policy, grace periods, reconciliation, replay and compaction.

mod common;

use common::*;
use xlane_ctl::core::{classify, Controller, Observation, Outcome, Policy, Principal, Usage};
use xlane_ctl::fabric::{FabricOp, SwitchMeter};
use xlane_ctl::proto::{
    ClientMsg, MeterReading, Reason, RefusalCode, ServerMsg, TerminateReason, TunnelId,
    TunnelState, Upcall, UNBOUNDED_NS,
};
use xlane_ctl::store::Record;
use xlane_te::{Allocator, Request, Resources, TeConfig};

fn req(sender: &str, to: &[&str], load: u32, period: u64, sublane: u8) -> ClientMsg {
    ClientMsg::RequestBandwidth {
        sender: sender.into(),
        receivers: names(to),
        load_bytes: load,
        period_ns: period,
        sublane,
    }
}

fn granted(out: &Outcome) -> (TunnelId, Resources) {
    match &out.reply {
        Some(ServerMsg::Granted {
            tunnel, resources, ..
        }) => (*tunnel, *resources),
        r => panic!("expected a grant, got {r:?}"),
    }
}

fn refused_code(out: &Outcome) -> RefusalCode {
    match &out.reply {
        Some(ServerMsg::Refused { code, message }) => {
            assert!(!message.is_empty());
            *code
        }
        r => panic!("expected a refusal, got {r:?}"),
    }
}

fn meter(tunnel: TunnelId, packets: u64, bytes: u64, interval_ns: u64) -> ClientMsg {
    ClientMsg::ReportMeters {
        readings: vec![MeterReading {
            tunnel,
            packets,
            bytes,
            interval_ns,
        }],
    }
}

#[test]
fn classify_table() {
    let p = policy(); // tolerance 10 %, unused below 25 %
    let o = |packets, bytes, interval_ns, dropped_packets| Observation {
        packets,
        bytes,
        interval_ns,
        dropped_packets,
    };
    // Tunnel: 100 B every 1000 ns.
    let table: &[(&str, Observation, Usage)] = &[
        ("exact rate", o(10, 1000, 10_000, 0), Usage::Normal),
        (
            "one packet of phase slack",
            o(11, 1100, 10_000, 0),
            Usage::Normal,
        ),
        (
            "slack + 10 % (12.1 allowed)",
            o(12, 1200, 10_000, 0),
            Usage::Normal,
        ),
        (
            "13 packets in 10 periods",
            o(13, 1300, 10_000, 0),
            Usage::Exceeded,
        ),
        ("oversized packets", o(10, 1001, 10_000, 0), Usage::Exceeded),
        ("any switch drop", o(1, 100, 10_000, 1), Usage::Exceeded),
        (
            "25 % used is not unused",
            o(3, 250, 10_000, 0),
            Usage::Normal,
        ),
        ("24.9 % used", o(3, 249, 10_000, 0), Usage::Unused),
        ("idle", o(0, 0, 10_000, 0), Usage::Unused),
        ("idle shorter than a period", o(0, 0, 999, 0), Usage::Normal),
        ("empty interval", o(5, 500, 0, 0), Usage::Normal),
        (
            "huge counters do not overflow",
            o(u64::MAX, u64::MAX, 1, 0),
            Usage::Exceeded,
        ),
    ];
    for (name, obs, want) in table {
        assert_eq!(classify(&p, 100, 1000, obs), *want, "{name}");
    }
}

#[test]
fn grants_match_the_allocator_run_directly() {
    let mut c = controller(policy());
    let mut a = Allocator::new(star4(), TeConfig::default());
    let reqs = [
        ("h0", vec!["h1"], 64u32, 200_000u64, 0u8),
        ("h2", vec!["h1"], 128, 100_000, 0),
        ("h3", vec!["h1", "h2"], 1500, 50_000, 1),
        ("h1", vec!["h0"], 200, 10_000, 0),
    ];
    for (i, (s, to, load, period, lane)) in reqs.iter().enumerate() {
        let out = c.handle(&host(s), &req(s, to, *load, *period, *lane), 1000);
        let (id, res) = granted(&out);
        let g = a
            .request(&Request {
                sender: s.to_string(),
                receivers: names(to),
                load_bytes: *load,
                period_ns: *period,
                sublane: *lane,
            })
            .unwrap();
        assert_eq!(id, TunnelId(i as u64 + 1));
        assert_eq!(res, g.resources, "request {i}");
        // Exactly the allocator's changed tunnels get a TE upcall, to their
        // owners, with the allocator's numbers.
        assert_eq!(out.upcalls.len(), g.changed.len(), "request {i}");
        for (ch, (owner, up)) in g.changed.iter().zip(&out.upcalls) {
            let t = TunnelId(ch.tunnel.0);
            assert_eq!(owner, &reqs[t.0 as usize - 1].0);
            assert_eq!(
                up,
                &Upcall::BandwidthChanged {
                    tunnel: t,
                    old: ch.old,
                    new: ch.new,
                    reason: Reason::Te,
                    grace_ns: 0,
                }
            );
        }
        assert!(matches!(out.fabric[..], [FabricOp::Install { tunnel, .. }] if tunnel == id));
        assert!(matches!(out.records[..], [Record::Granted { tunnel, .. }] if tunnel == id));
    }
    for t in a.tunnels() {
        assert_eq!(c.tunnel(TunnelId(t.id.0)).unwrap().resources, t.resources());
    }
}

#[test]
fn bad_requests_are_refused_without_any_state_change() {
    let mut c = controller(policy());
    let (t1, _) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 64, 200_000, 0), 0));
    let (t2, _) = granted(&c.handle(&host("h2"), &req("h2", &["h1"], 64, 200_000, 1), 0));
    let before = c.clone();
    let anon = Principal::Anonymous;
    let table: Vec<(&str, Principal, ClientMsg, RefusalCode)> = vec![
        (
            "unauthenticated",
            anon.clone(),
            req("h0", &["h1"], 64, 200_000, 0),
            RefusalCode::Unauthenticated,
        ),
        (
            "unauthenticated list",
            anon,
            ClientMsg::ListTunnels,
            RefusalCode::Unauthenticated,
        ),
        (
            "other sender",
            host("h0"),
            req("h1", &["h2"], 64, 200_000, 0),
            RefusalCode::Forbidden,
        ),
        (
            "release other's",
            host("h0"),
            ClientMsg::ReleaseBandwidth { tunnel: t2 },
            RefusalCode::Forbidden,
        ),
        (
            "change other's",
            host("h2"),
            ClientMsg::ChangeBandwidth {
                tunnel: t1,
                load_bytes: 10,
                period_ns: 1_000_000,
            },
            RefusalCode::Forbidden,
        ),
        (
            "meter other's",
            host("h2"),
            meter(t1, 1_000_000, 64_000_000, 1_000_000),
            RefusalCode::Forbidden,
        ),
        (
            "release unknown",
            host("h0"),
            ClientMsg::ReleaseBandwidth {
                tunnel: TunnelId(99),
            },
            RefusalCode::UnknownTunnel,
        ),
        (
            "change unknown",
            host("h0"),
            ClientMsg::ChangeBandwidth {
                tunnel: TunnelId(99),
                load_bytes: 1,
                period_ns: 1_000_000,
            },
            RefusalCode::UnknownTunnel,
        ),
        (
            "meter interval 0",
            host("h0"),
            meter(t1, 0, 0, 0),
            RefusalCode::OutOfRange,
        ),
        (
            "meter interval absurd",
            host("h0"),
            meter(t1, 0, 0, u64::MAX),
            RefusalCode::OutOfRange,
        ),
        (
            "too many receivers",
            host("h0"),
            req("h0", &["h1", "h2", "h3", "h1", "h2"], 64, 200_000, 0),
            RefusalCode::OutOfRange,
        ),
        (
            "load 0",
            host("h0"),
            req("h0", &["h1"], 0, 200_000, 0),
            RefusalCode::ZeroLoad,
        ),
        (
            "load > MTU",
            host("h0"),
            req("h0", &["h1"], 1501, 200_000, 0),
            RefusalCode::LoadTooLarge,
        ),
        (
            "period 0",
            host("h0"),
            req("h0", &["h1"], 64, 0, 0),
            RefusalCode::PeriodTooSmall,
        ),
        (
            "period absurd",
            host("h0"),
            req("h0", &["h1"], 64, u64::MAX, 0),
            RefusalCode::PeriodTooLarge,
        ),
        (
            "unknown receiver",
            host("h0"),
            req("h0", &["nobody"], 64, 200_000, 0),
            RefusalCode::UnknownHost,
        ),
        (
            "switch receiver",
            host("h0"),
            req("h0", &["sw"], 64, 200_000, 0),
            RefusalCode::NotAHost,
        ),
        (
            "unknown sender host",
            host("ghost"),
            req("ghost", &["h1"], 64, 200_000, 0),
            RefusalCode::UnknownHost,
        ),
        (
            "sublane beyond config",
            host("h0"),
            req("h0", &["h1"], 64, 200_000, 2),
            RefusalCode::UnknownSublane,
        ),
        (
            "no receivers",
            host("h0"),
            req("h0", &[], 64, 200_000, 0),
            RefusalCode::NoReceivers,
        ),
        (
            "receiver twice",
            host("h0"),
            req("h0", &["h1", "h1"], 64, 200_000, 0),
            RefusalCode::DuplicateReceiver,
        ),
        (
            "receiver is sender",
            host("h0"),
            req("h0", &["h0"], 64, 200_000, 0),
            RefusalCode::ReceiverIsSender,
        ),
        (
            "change to load 0",
            host("h0"),
            ClientMsg::ChangeBandwidth {
                tunnel: t1,
                load_bytes: 0,
                period_ns: 200_000,
            },
            RefusalCode::ZeroLoad,
        ),
        (
            "change to absurd period",
            host("h0"),
            ClientMsg::ChangeBandwidth {
                tunnel: t1,
                load_bytes: 64,
                period_ns: u64::MAX,
            },
            RefusalCode::PeriodTooLarge,
        ),
        (
            "connection message",
            host("h0"),
            ClientMsg::Subscribe { after: 0 },
            RefusalCode::Malformed,
        ),
    ];
    for (name, who, msg, want) in table {
        let out = c.handle(&who, &msg, 5);
        assert_eq!(refused_code(&out), want, "{name}");
        assert!(
            out.records.is_empty() && out.fabric.is_empty() && out.upcalls.is_empty(),
            "{name}"
        );
        c.same_state(&before)
            .unwrap_or_else(|e| panic!("{name}: state changed: {e}"));
        assert_eq!(c.tunnels(), before.tunnels(), "{name}");
        assert_eq!(c.next_id(), before.next_id(), "{name}");
    }
}

#[test]
fn release_shrinks_the_others_and_removes_from_fabric() {
    let mut c = controller(policy());
    let (t1, _) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 1000, 200_000, 0), 0));
    let (_t2, _) = granted(&c.handle(&host("h2"), &req("h2", &["h1"], 1000, 200_000, 0), 0));
    let grown = c.tunnel(t1).unwrap().resources;
    let out = c.handle(
        &host("h2"),
        &ClientMsg::ReleaseBandwidth {
            tunnel: TunnelId(2),
        },
        0,
    );
    assert_eq!(
        out.reply,
        Some(ServerMsg::Released {
            tunnel: TunnelId(2)
        })
    );
    assert_eq!(
        out.fabric,
        vec![FabricOp::Remove {
            tunnel: TunnelId(2)
        }]
    );
    assert_eq!(
        out.records,
        vec![Record::Released {
            tunnel: TunnelId(2)
        }]
    );
    match &out.upcalls[..] {
        [(
            owner,
            Upcall::BandwidthChanged {
                tunnel,
                old,
                new,
                reason: Reason::Te,
                grace_ns: 0,
            },
        )] => {
            assert_eq!(owner, "h0");
            assert_eq!(*tunnel, t1);
            assert_eq!(*old, grown);
            assert!(new.max_jitter_ns < old.max_jitter_ns);
        }
        u => panic!("{u:?}"),
    }
}

#[test]
fn exceeding_demotes_then_terminates() {
    let mut c = controller(policy()); // K = 2
                                      // t1 (h0->h1) and t2 (h2->h1) share sw->h1 on sub-lane 0.
    let (t1, r1) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 1000, 100_000, 0), 0));
    let (t2, _) = granted(&c.handle(&host("h2"), &req("h2", &["h1"], 1000, 100_000, 0), 0));
    let shared = c.tunnel(t1).unwrap().resources;
    assert!(shared.max_jitter_ns > r1.max_jitter_ns);
    let period = c.tunnel(t2).unwrap().resources.period_ns;
    let interval = period * 100;
    // t2 sends twice its rate.
    let out = c.handle(&host("h2"), &meter(t2, 200, 200_000, interval), 10);
    assert_eq!(out.reply, Some(ServerMsg::Ack));
    assert_eq!(out.records, vec![Record::Demoted { tunnel: t2 }]);
    assert_eq!(out.fabric, vec![FabricOp::Demote { tunnel: t2 }]);
    let info = c.tunnel(t2).unwrap();
    assert_eq!(info.state, TunnelState::Unbounded);
    assert_eq!(info.resources.max_jitter_ns, UNBOUNDED_NS);
    assert!(c.alloc_tunnel(t2).is_none());
    // Owner: BW_EXCEEDED; t1 (shared queue): TE with its jitter back down.
    let mut got_owner = false;
    let mut got_other = false;
    for (h, u) in &out.upcalls {
        match u {
            Upcall::BandwidthChanged {
                tunnel,
                new,
                reason: Reason::BwExceeded,
                ..
            } => {
                assert_eq!((h.as_str(), *tunnel), ("h2", t2));
                assert_eq!(new.max_jitter_ns, UNBOUNDED_NS);
                got_owner = true;
            }
            Upcall::BandwidthChanged {
                tunnel,
                old,
                new,
                reason: Reason::Te,
                ..
            } => {
                assert_eq!((h.as_str(), *tunnel), ("h0", t1));
                assert_eq!(*old, shared);
                assert_eq!(*new, r1);
                got_other = true;
            }
            u => panic!("{u:?}"),
        }
    }
    assert!(got_owner && got_other);
    // Still exceeding: once is tolerated (K = 2) ...
    let out = c.handle(&host("h2"), &meter(t2, 200, 200_000, interval), 20);
    assert!(out.upcalls.is_empty() && out.records.is_empty());
    // ... a compliant interval resets the count ...
    c.handle(&host("h2"), &meter(t2, 100, 100_000, interval), 30);
    let out = c.handle(&host("h2"), &meter(t2, 200, 200_000, interval), 40);
    assert!(out.upcalls.is_empty());
    // ... and the second consecutive one terminates.
    let out = c.handle(&host("h2"), &meter(t2, 200, 200_000, interval), 50);
    assert_eq!(out.records, vec![Record::Terminated { tunnel: t2 }]);
    assert_eq!(out.fabric, vec![FabricOp::Remove { tunnel: t2 }]);
    assert_eq!(
        out.upcalls,
        vec![(
            "h2".to_string(),
            Upcall::BandwidthTerminated {
                tunnel: t2,
                reason: TerminateReason::BwExceeded
            }
        )]
    );
    assert!(c.tunnel(t2).is_none());
}

#[test]
fn switch_drops_demote_and_change_readmits_with_the_same_id() {
    let mut c = controller(policy());
    let (t1, r1) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 500, 100_000, 0), 0));
    let out = c.on_switch_meters(
        &[
            SwitchMeter {
                tunnel: t1,
                packets: 10,
                bytes: 5000,
                dropped_packets: 1,
                interval_ns: 1_000_000,
            },
            SwitchMeter {
                tunnel: TunnelId(77),
                packets: 1,
                bytes: 1,
                dropped_packets: 9,
                interval_ns: 1,
            },
        ],
        5,
    );
    assert_eq!(out.reply, None);
    assert_eq!(out.records, vec![Record::Demoted { tunnel: t1 }]);
    assert!(c.allocator().is_empty());
    let out = c.handle(
        &host("h0"),
        &ClientMsg::ChangeBandwidth {
            tunnel: t1,
            load_bytes: 500,
            period_ns: 100_000,
        },
        6,
    );
    assert_eq!(
        out.reply,
        Some(ServerMsg::Changed {
            tunnel: t1,
            resources: r1,
            period_raised: false
        })
    );
    assert!(matches!(out.fabric[..], [FabricOp::Install { tunnel, .. }] if tunnel == t1));
    assert_eq!(c.tunnel(t1).unwrap().state, TunnelState::Active);
    c.allocator().verify().unwrap();
}

#[test]
fn unused_bandwidth_is_reclaimed_after_the_grace_period() {
    let p = policy(); // M = 3, grace 1 ms, factor 2
    let mut c = controller(p.clone());
    let (t1, r1) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 100, 100_000, 0), 0));
    let idle = meter(t1, 0, 0, r1.period_ns * 10);
    for i in 0..2 {
        let out = c.handle(&host("h0"), &idle, i);
        assert!(out.upcalls.is_empty(), "interval {i}");
    }
    let out = c.handle(&host("h0"), &idle, 100);
    let new = match &out.upcalls[..] {
        [(
            h,
            Upcall::BandwidthChanged {
                tunnel,
                old,
                new,
                reason: Reason::BwUnused,
                grace_ns,
            },
        )] => {
            assert_eq!(
                (h.as_str(), *tunnel, *old, *grace_ns),
                ("h0", t1, r1, p.grace_ns)
            );
            assert_eq!(new.period_ns, r1.period_ns * 2);
            *new
        }
        u => panic!("{u:?}"),
    };
    assert!(
        out.records.is_empty(),
        "nothing changes before the grace period ends"
    );
    // Old parameters hold during the grace period, even with more idle intervals.
    for i in 0..5 {
        assert!(c.handle(&host("h0"), &idle, 200 + i).upcalls.is_empty());
    }
    assert_eq!(c.tunnel(t1).unwrap().resources, r1);
    assert_eq!(c.next_deadline(), Some(100 + p.grace_ns));
    assert_eq!(c.tick(100 + p.grace_ns - 1), Outcome::default());
    let out = c.tick(100 + p.grace_ns);
    assert_eq!(
        out.records,
        vec![Record::Changed {
            tunnel: t1,
            load_bytes: 100,
            period_ns: new.period_ns,
            resources: new
        }]
    );
    match &out.fabric[..] {
        [FabricOp::Install {
            tunnel,
            period_ns,
            rate_bps,
            ..
        }] => {
            assert_eq!((*tunnel, *period_ns), (t1, new.period_ns));
            assert_eq!(*rate_bps, xlane_te::alloc::rate_bps(100, new.period_ns));
        }
        f => panic!("{f:?}"),
    }
    assert_eq!(c.tunnel(t1).unwrap().resources, new);
    assert_eq!(c.next_deadline(), None);
}

#[test]
fn a_change_during_the_grace_period_cancels_the_reclaim() {
    let mut c = controller(policy());
    let (t1, r1) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 100, 100_000, 0), 0));
    for i in 0..3 {
        c.handle(&host("h0"), &meter(t1, 0, 0, r1.period_ns * 10), i);
    }
    assert!(c.next_deadline().is_some());
    let out = c.handle(
        &host("h0"),
        &ClientMsg::ChangeBandwidth {
            tunnel: t1,
            load_bytes: 200,
            period_ns: 100_000,
        },
        10,
    );
    assert!(matches!(out.reply, Some(ServerMsg::Changed { .. })));
    assert_eq!(c.next_deadline(), None);
    assert_eq!(c.tick(u64::MAX), Outcome::default());
    assert_eq!(c.tunnel(t1).unwrap().resources.load_bytes, 200);
}

#[test]
fn unused_at_the_largest_period_terminates() {
    let mut c = controller(policy());
    let max = TeConfig::default().max_period_ns;
    let (t1, _) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 100, max, 0), 0));
    let mut last = Outcome::default();
    for i in 0..3 {
        last = c.handle(&host("h0"), &meter(t1, 0, 0, max * 2), i);
    }
    assert_eq!(
        last.upcalls,
        vec![(
            "h0".to_string(),
            Upcall::BandwidthTerminated {
                tunnel: t1,
                reason: TerminateReason::BwUnused
            }
        )]
    );
    assert_eq!(last.records, vec![Record::Terminated { tunnel: t1 }]);
    assert!(c.tunnels().is_empty());
}

#[test]
fn te_grace_holds_back_the_install_of_a_widening_grant() {
    let p = Policy {
        te_grace_ns: 5_000,
        ..policy()
    };
    let mut c = controller(p);
    let (t1, _) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 1000, 100_000, 0), 0));
    // Nobody widened: installed at once.
    let out = c.handle(&host("h2"), &req("h2", &["h3"], 1000, 100_000, 0), 0);
    assert_eq!(out.fabric.len(), 1);
    // Shares sw->h1 with t1: t1 widens, the new tunnel waits.
    let out = c.handle(&host("h3"), &req("h3", &["h1"], 1000, 100_000, 0), 100);
    let (t3, _) = granted(&out);
    assert!(out.fabric.is_empty());
    assert!(out.upcalls.iter().any(|(h, u)| h == "h0"
        && matches!(u, Upcall::BandwidthChanged { tunnel, reason: Reason::Te, grace_ns: 5_000, .. } if *tunnel == t1)));
    assert!(c.tick(5_099).fabric.is_empty());
    assert!(matches!(c.tick(5_100).fabric[..], [FabricOp::Install { tunnel, .. }] if tunnel == t3));
}

#[test]
fn reconcile_keeps_known_and_terminates_unknown() {
    let mut c = controller(policy());
    let (t1, _) = granted(&c.handle(&host("h0"), &req("h0", &["h1"], 64, 200_000, 0), 0));
    let (t2, _) = granted(&c.handle(&host("h1"), &req("h1", &["h0"], 64, 200_000, 0), 0));
    let before = c.clone();
    let out = c.handle(
        &host("h0"),
        &ClientMsg::ReconcileHost {
            tunnels: vec![t1, t2, TunnelId(42), t1],
        },
        0,
    );
    assert_eq!(
        out.reply,
        Some(ServerMsg::Reconciled {
            kept: vec![t1],
            terminated: vec![t2, TunnelId(42)]
        })
    );
    let term = |t| {
        (
            "h0".to_string(),
            Upcall::BandwidthTerminated {
                tunnel: t,
                reason: TerminateReason::Unknown,
            },
        )
    };
    assert_eq!(out.upcalls, vec![term(t2), term(TunnelId(42))]);
    // Only the tunnel nobody owns is removed from the fabric.
    assert_eq!(
        out.fabric,
        vec![FabricOp::Remove {
            tunnel: TunnelId(42)
        }]
    );
    assert!(out.records.is_empty());
    c.same_state(&before).unwrap();
}

/// A seeded random history of operations through the live path.
fn random_history(seed: u64, steps: usize) -> (Controller, Vec<Record>) {
    let mut rng = Rng::new(seed);
    let mut c = controller(policy());
    let mut records = Vec::new();
    let hosts = ["h0", "h1", "h2", "h3"];
    let mut now = 0u64;
    for _ in 0..steps {
        now += 1 + rng.below(500_000);
        let live: Vec<_> = c.tunnels();
        let out = match rng.below(10) {
            0..=3 => {
                let s = hosts[rng.below(4) as usize];
                let mut to: Vec<&str> = hosts.iter().copied().filter(|h| *h != s).collect();
                to.truncate(1 + rng.below(3) as usize);
                let load = 1 + rng.below(1500) as u32;
                let period = 10_000 + rng.below(2_000_000);
                c.handle(
                    &host(s),
                    &req(s, &to, load, period, rng.below(2) as u8),
                    now,
                )
            }
            4 if !live.is_empty() => {
                let t = &live[rng.below(live.len() as u64) as usize];
                c.handle(
                    &host(&t.sender),
                    &ClientMsg::ReleaseBandwidth { tunnel: t.tunnel },
                    now,
                )
            }
            5 | 6 if !live.is_empty() => {
                let t = &live[rng.below(live.len() as u64) as usize];
                let load = 1 + rng.below(1500) as u32;
                let period = 10_000 + rng.below(2_000_000);
                c.handle(
                    &host(&t.sender),
                    &ClientMsg::ChangeBandwidth {
                        tunnel: t.tunnel,
                        load_bytes: load,
                        period_ns: period,
                    },
                    now,
                )
            }
            7 | 8 if !live.is_empty() => {
                // Over, under or on target.
                let t = &live[rng.below(live.len() as u64) as usize];
                let interval = t.resources.period_ns * 20;
                let pk = [0u64, 20, 60][rng.below(3) as usize];
                c.handle(
                    &host(&t.sender),
                    &meter(t.tunnel, pk, pk * t.resources.load_bytes as u64, interval),
                    now,
                )
            }
            _ => c.tick(now),
        };
        records.extend(out.records);
    }
    (c, records)
}

#[test]
fn replay_reproduces_ids_and_resources() {
    let mut totals = [0usize; 2];
    for seed in 0..25 {
        let (c, records) = random_history(seed, 120);
        let kinds: Vec<u8> = records
            .iter()
            .map(|r| match r {
                Record::Granted { .. } => 0,
                Record::Changed { .. } => 1,
                Record::Released { .. } => 2,
                Record::Demoted { .. } => 3,
                Record::Terminated { .. } => 4,
                _ => 5,
            })
            .collect();
        let count = |k| kinds.iter().filter(|&&x| x == k).count();
        eprintln!(
            "seed {seed}: {} live, granted {} changed {} released {} demoted {} terminated {}",
            c.tunnels().len(),
            count(0),
            count(1),
            count(2),
            count(3),
            count(4)
        );
        let r = Controller::recover(star4(), TeConfig::default(), policy(), &records)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        c.same_state(&r)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(c.tunnels(), r.tunnels(), "seed {seed}");
        // Records without trees (journals written before trees were
        // recorded) replay by searching again: on a star, to the same state.
        let bare: Vec<Record> = records
            .iter()
            .cloned()
            .map(|mut r| {
                if let Record::Granted { hops, .. } = &mut r {
                    assert!(!hops.is_empty(), "seed {seed}: a grant without its tree");
                    hops.clear();
                }
                r
            })
            .collect();
        let r = Controller::recover(star4(), TeConfig::default(), policy(), &bare)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        c.same_state(&r)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // Every prefix (a journal cut anywhere between records) replays.
        for cut in [
            0,
            records.len() / 3,
            records.len() / 2,
            records.len().saturating_sub(1),
        ] {
            Controller::recover(star4(), TeConfig::default(), policy(), &records[..cut])
                .unwrap_or_else(|e| panic!("seed {seed} cut {cut}: {e}"));
        }
        // Compaction: on a star every tree is unique, so the live tunnels
        // alone always reproduce the state.
        let snap = c
            .compaction_records()
            .unwrap_or_else(|e| panic!("seed {seed}: not compactable: {e}"));
        let r = Controller::recover(star4(), TeConfig::default(), policy(), &snap).unwrap();
        c.same_state(&r)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(r.next_id(), c.next_id());
        assert_eq!(r.tunnels(), c.tunnels());
        // A journal continued after the snapshot replays on top of it.
        let mut c2 = r.clone();
        let mut c3 = c.clone();
        let out2 = c2.handle(&host("h0"), &req("h0", &["h3"], 100, 500_000, 1), 1);
        let out3 = c3.handle(&host("h0"), &req("h0", &["h3"], 100, 500_000, 1), 1);
        assert_eq!(out2, out3, "seed {seed}");
        let mut both = snap.clone();
        both.extend(out2.records);
        let r2 = Controller::recover(star4(), TeConfig::default(), policy(), &both).unwrap();
        c3.same_state(&r2)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        totals[0] += count(3);
        totals[1] += count(1);
    }
}

#[test]
fn replay_detects_a_diverging_journal() {
    let mut c = controller(policy());
    let out = c.handle(&host("h0"), &req("h0", &["h1"], 64, 200_000, 0), 0);
    let mut rec = out.records[0].clone();
    if let Record::Granted { resources, .. } = &mut rec {
        resources.max_jitter_ns += 1;
    }
    let e = Controller::recover(star4(), TeConfig::default(), policy(), &[rec]).unwrap_err();
    assert!(
        matches!(e, xlane_ctl::core::ReplayError::Diverged { index: 0, .. }),
        "{e}"
    );
    // A recorded tree that the topology does not have (or that is not a
    // tree for the request) is refused on replay, by name.
    for (hops, why) in [
        (vec![("h0", "sw"), ("sw", "h9")], "`sw -> h9` is not a link"),
        (vec![("h0", "sw"), ("sw", "h2")], "does not reach `h1`"),
    ] {
        let mut rec = out.records[0].clone();
        if let Record::Granted { hops: h, .. } = &mut rec {
            *h = hops
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
        }
        let e = Controller::recover(star4(), TeConfig::default(), policy(), &[rec]).unwrap_err();
        assert!(
            matches!(e, xlane_ctl::core::ReplayError::Refused { index: 0, .. }),
            "{e}"
        );
        assert!(e.to_string().contains(why), "{e}");
    }
    let e = Controller::recover(
        star4(),
        TeConfig::default(),
        policy(),
        &[Record::Released {
            tunnel: TunnelId(3),
        }],
    )
    .unwrap_err();
    assert!(
        matches!(e, xlane_ctl::core::ReplayError::BadTunnel { .. }),
        "{e}"
    );
}

#[test]
fn resync_reprograms_every_tunnel() {
    let mut c = controller(policy());
    let (t1, _) = granted(&c.handle(&host("h0"), &req("h0", &["h1", "h2"], 64, 200_000, 0), 0));
    let (t2, _) = granted(&c.handle(&host("h3"), &req("h3", &["h1"], 64, 200_000, 1), 0));
    c.on_switch_meters(
        &[SwitchMeter {
            tunnel: t2,
            packets: 1,
            bytes: 64,
            dropped_packets: 3,
            interval_ns: 1000,
        }],
        1,
    );
    let ops = c.resync();
    assert_eq!(ops.len(), 3);
    match &ops[0] {
        FabricOp::Install {
            tunnel,
            sender,
            receivers,
            hops,
            sublane,
            burst_bytes,
            queue_pkts,
            ..
        } => {
            assert_eq!(*tunnel, t1);
            assert_eq!(sender, "h0");
            assert_eq!(receivers, &names(&["h1", "h2"]));
            assert_eq!(hops.len(), 3, "h0->sw, sw->h1, sw->h2: {hops:?}");
            assert_eq!((*sublane, *burst_bytes, *queue_pkts), (0, 64, 1));
        }
        o => panic!("{o:?}"),
    }
    assert!(matches!(ops[1], FabricOp::Install { tunnel, .. } if tunnel == t2));
    assert_eq!(ops[2], FabricOp::Demote { tunnel: t2 });
}
