//! A member's session and three controller replicas in this process on
//! 127.0.0.1 (fat-tree:4), the session given all three addresses:
//! - the serving replica is stopped: the session must connect to the
//!   replica that takes over, find its trees held there, and hear the
//!   upcalls of that replica;
//! - the session opens before any replica runs, and then while one runs
//!   that cannot serve alone: it must keep trying until they serve.

use super::*;
use std::sync::{mpsc, Arc};
use xlane_ctl::proto::MeterReading;
use xlane_ctl_replica::testing::{connect, Group};

/// How long anything may take before the test gives up (a bound against
/// hanging, not a measurement).
const PATIENCE: Duration = Duration::from_secs(30);

/// The next event `want` accepts; every event before it is returned too.
fn wait_event(
    rx: &mpsc::Receiver<SessionEvent>,
    what: &str,
    want: impl Fn(&SessionEvent) -> bool,
) -> (SessionEvent, Vec<SessionEvent>) {
    let mut before = Vec::new();
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(e) if want(&e) => return (e, before),
            Ok(e) => before.push(e),
            Err(_) => panic!("no {what}; events: {before:?}"),
        }
    }
}

/// The session config of h0, member 1 of three (h0, h1, h2), given every
/// replica of `g`.
fn h0_config(g: &Group) -> SessionConfig {
    SessionConfig {
        controllers: g.addrs.clone(),
        key: g.keys.get("h0").unwrap().clone(),
        me: 1,
        names: (1..=3).map(|i| (i, format!("h{}", i - 1))).collect(),
        burst_bytes: 256,
        wait_for_peers: PATIENCE,
        wait_for_controller: PATIENCE,
        sealed: false,
        tree_keys: false,
    }
}

/// h0 holds `trees`, active, at the replica at `at` (the one its session
/// is connected to: under load another replica may still take hosts for a
/// moment after it lost the lead, and what it is told reaches no session);
/// returns h0's connection to it.
fn h0_holds(g: &Group, at: SocketAddr, trees: [u32; 2]) -> Client {
    let mut c = connect(&[at], "h0", &g.keys, PATIENCE);
    let (list, _) = c.list().unwrap();
    for t in trees {
        let row = list.iter().find(|i| i.tunnel.0 == t as u64);
        assert!(
            row.is_some_and(|i| i.sender == "h0" && i.state == TunnelState::Active),
            "tree {t}: {list:?}"
        );
    }
    c
}

/// h1 and h2 hold their trees at `g`'s serving replica, as their
/// sessions would.
fn others_hold_trees(g: &Group) {
    for (h, to) in [("h1", ["h0", "h2"]), ("h2", ["h0", "h1"])] {
        let mut c = connect(&g.addrs, h, &g.keys, PATIENCE);
        let to: Vec<String> = to.iter().map(|s| s.to_string()).collect();
        for sublane in [FD_SUBLANE, REPL_SUBLANE] {
            c.request(&to, 200, 10_000_000, sublane).unwrap();
        }
    }
}

#[test]
fn a_session_follows_a_controller_takeover() {
    let mut g = Group::start();
    let addrs = g.addrs.clone();
    g.wait_serving(PATIENCE);

    others_hold_trees(&g);

    // h0's session, given every replica's address.
    let cfg = h0_config(&g);
    let mut timing = LaneTiming {
        fd_period_ns: 10_000_000,
        repl_period_ns: 1_000_000,
        ..LaneTiming::default()
    };
    let opened = Session::open(cfg, &mut timing).unwrap();
    let own = opened.session.own();
    let fd_period_ns = timing.fd_period_ns;
    let before = opened.session.controller().unwrap();
    assert!(addrs.contains(&before), "{before}");
    let control = Arc::new(LaneControl::new(&timing));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let run = {
        let (control, stop) = (control.clone(), stop.clone());
        std::thread::spawn(move || {
            // Member 2 leads the lane: this one keeps a follower's tree.
            opened.session.run(
                &control,
                &|| 2,
                &mut |e| {
                    eprintln!("{e:?}");
                    drop(tx.send(e))
                },
                &stop,
            )
        })
    };

    // The replica serving the session goes away.
    let first =
        g.rs.iter()
            .position(|r| r.as_ref().unwrap().client_addr() == Some(before))
            .unwrap();
    let gone = g.rs[first].take().unwrap();
    let gone_addr = before;
    gone.stop();
    let (lost, _) = wait_event(&rx, "controller_lost", |e| {
        matches!(e, SessionEvent::ControllerLost { .. })
    });
    let (back, _) = wait_event(&rx, "reconnected", |e| {
        matches!(e, SessionEvent::Reconnected { .. })
    });
    let SessionEvent::Reconnected {
        controller, kept, ..
    } = back
    else {
        unreachable!()
    };
    // It connected to a replica that served (others refuse hosts), not
    // the stopped one, and that replica holds both of its trees.
    assert_ne!(controller, gone_addr, "{lost:?}");
    assert!(addrs.contains(&controller));
    assert_eq!(kept, vec![own.fd, own.repl]);
    let mut c = h0_holds(&g, controller, [own.fd, own.repl]);

    // Its subscription moved too: the X-FD tree overrun (as its meters
    // would report it) is demoted, and the session hears it.
    c.report_meters(&[MeterReading {
        tunnel: TunnelId(own.fd as u64),
        packets: 1_000,
        bytes: 1_000,
        interval_ns: fd_period_ns,
    }])
    .unwrap();
    let (changed, _) = wait_event(&rx, "bandwidth_changed", |e| {
        matches!(e, SessionEvent::BandwidthChanged { .. })
    });
    match changed {
        SessionEvent::BandwidthChanged {
            tree,
            tunnel,
            reason,
            ..
        } => {
            assert_eq!(
                (tree, tunnel, reason),
                (Tree::Fd, own.fd, Reason::BwExceeded)
            );
        }
        _ => unreachable!(),
    }

    stop.store(true, Ordering::Relaxed);
    let session = run.join().unwrap();
    assert!(session.controller().is_some());
    assert_eq!(session.release().run(), 2);
}

/// The first connect waits for the controller: the session opens while no
/// replica runs, goes on through a replica that refuses it (`NotLeader`:
/// one of three elects no one), and connects once the others start.
#[test]
fn a_session_opens_before_the_controller_serves() {
    let mut g = Group::unstarted();
    let addrs = g.addrs.clone();
    let cfg = h0_config(&g);
    // Each pass that found no serving replica: whether its last refusal
    // was `NotLeader` (the last address's replica runs) or not (nothing
    // listens there).
    let (tx, rx) = mpsc::channel();
    let open = std::thread::spawn(move || {
        let mut timing = LaneTiming {
            fd_period_ns: 10_000_000,
            repl_period_ns: 1_000_000,
            ..LaneTiming::default()
        };
        Session::open_with(cfg, &mut timing, &mut |e| {
            let refused = matches!(
                e,
                ClientError::Refused {
                    code: RefusalCode::NotLeader,
                    ..
                }
            );
            let _ = tx.send(refused);
        })
    });
    let pass = |what: &str, want: bool| loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(refused) if refused == want => return,
            Ok(_) => continue,
            Err(_) => panic!("no pass that {what}"),
        }
    };
    pass("found nothing listening", false);
    // The last replica of the list alone: it runs but cannot serve.
    g.start_replica(2);
    pass("was refused NotLeader", true);
    assert!(g.rs[2].as_ref().is_some_and(|r| !r.serves()));
    g.start_replica(0);
    g.start_replica(1);
    g.wait_serving(PATIENCE);

    others_hold_trees(&g);
    let opened = open
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the session did not open: {e}"));
    let at = opened.session.controller().expect("connected");
    assert!(addrs.contains(&at), "{at}");
    assert_eq!(opened.grants.len(), 2);
    let own = opened.session.own();
    let _ = h0_holds(&g, at, [own.fd, own.repl]);
    assert_eq!(opened.session.release().run(), 2);
}
