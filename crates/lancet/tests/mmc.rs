//! The M/M/1 check runs end to end and produces a complete table: the
//! synthetic server (one worker, exponential service of mean 500 µs) is
//! driven by the Poisson client at ρ = 0.3, 0.5 and 0.7, one second each,
//! after half a second of zero-service overhead run (about 4 s).
//!
//! Only what does not depend on how busy the machine is gets checked
//! (docs/design.md, "Principles"): every request the schedule implies is sent,
//! answered and kernel-stamped, the server reports its sojourn, and every
//! (load, percentile) row carries theory, a measurement and the server's
//! figure. Whether the measured percentiles *agree* with M/M/1 theory is a
//! measurement of the machine and is the command `xlane lancet mmc-check`
//! (about 45 s, with longer runs and the confidence intervals).

use xlane_lancet::client::CLIENT_STREAM;
use xlane_lancet::dist::Schedule;
use xlane_lancet::mmc::{run_mmc, MmcConfig};
use xlane_lancet::rng::Rng;
use xlane_lancet::Arrival;

#[test]
fn mm1_check_runs_every_load_and_fills_its_table() {
    let cfg = MmcConfig {
        duration_ns: 1_000_000_000,
        max_duration_ns: 1_000_000_000,
        baseline_ns: 500_000_000,
        ..MmcConfig::default()
    };
    let rep = run_mmc(&cfg).expect("the M/M/1 check could not run");
    println!("{}", rep.render());

    assert_eq!(rep.runs.len(), cfg.loads.len());
    assert_eq!(rep.rows.len(), cfg.loads.len() * cfg.percentiles.len());
    assert!(rep.overhead.samples > 0, "{:?}", rep.overhead);
    for (run, &rho) in rep.runs.iter().zip(&cfg.loads) {
        assert_eq!(run.rho, rho);
        let c = &run.report.config;
        assert_eq!(c.arrival, Arrival::Poisson);
        // The requests its seeded schedule puts before the end of the run.
        let mut sched =
            Schedule::with_rng(Arrival::Poisson, c.rate, Rng::stream(c.seed, CLIENT_STREAM));
        let times: Vec<u64> = std::iter::from_fn(|| Some(sched.next_ns()))
            .take_while(|&t| t < c.max_duration_ns)
            .collect();
        let k = &run.report.counts;
        assert_eq!(k.sent, times.len() as u64, "ρ = {rho}: {k:?}");
        // Every one answered (the drain is a safety net of 1 s) and parsed.
        assert_eq!(
            (k.received, k.lost, k.malformed, k.unmatched, k.send_errors),
            (k.sent, 0, 0, 0, 0),
            "ρ = {rho}: {k:?}"
        );
        // Every latency came with kernel stamps on loopback.
        assert_eq!(k.tx_user + k.rx_user, 0, "ρ = {rho}: {k:?}");
        let after = times.iter().filter(|&&t| t >= c.warmup()).count();
        assert_eq!(run.report.samples.after_warmup, after, "ρ = {rho}");
    }
    for row in &rep.rows {
        assert!(row.theory_ns.is_finite() && row.theory_ns > 0.0, "{row:?}");
        assert!(row.measured_ns.is_some(), "no measurement: {row:?}");
        assert!(row.server_ns.is_some(), "no server sojourn: {row:?}");
        assert!(row.corrected_ns.is_some(), "{row:?}");
        assert_eq!(
            row.pass,
            row.window_ns
                .is_some_and(|(lo, hi)| { row.theory_ns >= lo && row.theory_ns <= hi })
        );
    }
    assert_eq!(rep.all_pass, rep.rows.iter().all(|r| r.pass));
}
