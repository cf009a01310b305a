//! lancet and `sockperf ping-pong` both measure one real `sockperf server`
//! on 127.0.0.1, through the code of `xlane lancet cross-check`
//! (`xlane_lancet::cross_check`), two alternating rounds of 1 s each.
//!
//! Only what does not depend on how busy the machine is gets checked
//! (docs/design.md, "Principles"): lancet speaks sockperf's protocol (every
//! request it sends is answered and parses as sockperf's reply, none is
//! malformed or unmatched), sockperf's output and its `--full-log` parse
//! and agree on how many round trips there were, both tools' sample counts
//! are what their schedules imply, and the report carries a finite ratio
//! per percentile and the floor. The *values* — whether the two tools'
//! percentiles agree — are not asserted: that comparison is the command
//! `xlane lancet cross-check`, whose verdict depends on the machine.
//!
//! Needs the Debian package `sockperf` (scripts/test.sh installs it).
//! Without sockperf this test fails, on purpose: it must not pass silently.
//! No placement and no real-time priority, so neither two CPUs nor root are
//! needed.

use xlane_lancet::cross_check::{self, CrossCheckConfig, CrossCheckError};
use xlane_lancet::dist::Schedule;
use xlane_lancet::Arrival;

#[test]
fn lancet_and_sockperf_both_measure_a_real_sockperf_server() {
    let cfg = CrossCheckConfig {
        rounds: 2,
        floor_ns: 50_000_000,
        // A safety net, not a bound: wait this long for the last replies.
        drain_ns: 5_000_000_000,
        ..CrossCheckConfig::default()
    };
    let rep = match cross_check::run(&cfg) {
        Ok(r) => r,
        Err(e @ CrossCheckError::NotInstalled { .. }) => {
            panic!("{e} (run `bash scripts/test.sh`, which installs the Debian package `sockperf`)")
        }
        Err(e) => panic!("the cross-check could not run: {e}"),
    };
    println!("{}", rep.render());
    assert!(rep.sockperf_version.is_some(), "sockperf --version unread");

    // What lancet's fixed schedule implies for one round.
    let round_ns = cfg.round_seconds * 1_000_000_000;
    let lc = cross_check::lancet_config(&cfg, rep.port, 0);
    let mut sched = Schedule::new(Arrival::Fixed, f64::from(cfg.rate), 1);
    let times: Vec<u64> = std::iter::from_fn(|| Some(sched.next_ns()))
        .take_while(|&t| t < round_ns)
        .collect();
    let want_sent = times.len() as u64;
    let want_samples = times.iter().filter(|&&t| t >= lc.warmup()).count();

    assert_eq!(rep.sockperf_rounds.len(), cfg.rounds);
    assert_eq!(rep.lancet_rounds.len(), cfg.rounds);
    for r in &rep.lancet_rounds {
        // Every request sent, answered, and read as sockperf's reply.
        assert_eq!(r.sent, want_sent, "round {}: {r:?}", r.round);
        assert_eq!(
            (r.received, r.lost, r.malformed, r.unmatched, r.send_errors),
            (r.sent, 0, 0, 0, 0),
            "round {}: {r:?}",
            r.round
        );
        assert_eq!(r.samples, want_samples, "round {}: {r:?}", r.round);
        assert_eq!(r.samples, r.after_warmup, "round {}: {r:?}", r.round);
        assert_eq!(r.user_rtt_ns.len(), cfg.percentiles.len(), "{r:?}");
    }
    for r in &rep.sockperf_rounds {
        // Its summary and its full log count the same round trips, and it
        // cannot have made more than its rate allows.
        let n = r
            .observations
            .expect("sockperf prints its observation count");
        assert_eq!(n, r.logged as u64, "round {}: {r:?}", r.round);
        assert!(n > 0, "round {}: sockperf measured nothing", r.round);
        assert!(
            n <= u64::from(cfg.rate) * cfg.round_seconds,
            "round {}: {r:?}",
            r.round
        );
        assert!(r.dropped.is_some(), "drop count not parsed: {r:?}");
        assert_eq!(
            r.printed.len(),
            cfg.percentiles.len(),
            "sockperf's own percentiles not parsed: {r:?}"
        );
    }
    let logged: usize = rep.sockperf_rounds.iter().map(|r| r.logged).sum();
    assert_eq!(rep.sockperf_pool, logged);
    assert_eq!(rep.lancet_pool, want_samples * cfg.rounds);
    assert_eq!(rep.lancet_lost, 0);

    // One row per percentile, with a ratio that is a number (its value is
    // the command's business).
    assert_eq!(rep.rows.len(), cfg.percentiles.len());
    for (row, &p) in rep.rows.iter().zip(&cfg.percentiles) {
        assert_eq!(row.percentile, p);
        assert!(row.sockperf_ns > 0 && row.lancet_user_rtt_ns > 0, "{row:?}");
        assert!(row.ratio.is_finite() && row.ratio > 0.0, "{row:?}");
    }
    assert!(rep.verdict.starts_with("verdict: "), "{}", rep.verdict);

    // The floor: every CPU probed in every round's slice.
    assert!(!rep.floor.is_empty());
    for f in &rep.floor {
        assert!(f.duration_ns > 0, "{f:?}");
        assert!(f.stolen_ns <= f.duration_ns, "{f:?}");
        assert!((0.0..=1.0).contains(&f.touch_share), "{f:?}");
    }
}
