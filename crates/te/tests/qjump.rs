//! QJump epochs, rate limits and level answers.

use xlane_te::qjump::{Level, QjumpError, QjumpParams};

fn p(n: u32, bytes: u32, bps: u64, sync: bool) -> QjumpParams {
    QjumpParams {
        hosts: n,
        max_packet_bytes: bytes,
        rate_bps: bps,
        synchronized: sync,
    }
}

#[test]
fn epoch_is_n_p_over_r_or_twice() {
    // (n, P bytes, R bit/s, synchronized, expected ns)
    let table: &[(u32, u32, u64, bool, u64)] = &[
        // n·P/R = 4 · 12000 bit / 1 Gbit/s = 48 µs
        (4, 1500, 1_000_000_000, true, 48_000),
        // 2n·P/R = 96 µs
        (4, 1500, 1_000_000_000, false, 96_000),
        // 1000 hosts, 10 Gbit/s: n·P/R = 1000 · 1.2 µs = 1.2 ms; 2× = 2.4 ms
        (1000, 1500, 10_000_000_000, true, 1_200_000),
        (1000, 1500, 10_000_000_000, false, 2_400_000),
        // 1 host, 64 B at 1 Gbit/s: 512 ns
        (1, 64, 1_000_000_000, true, 512),
    ];
    for &(n, b, r, s, want) in table {
        assert_eq!(
            p(n, b, r, s).epoch_ns(),
            Ok(want),
            "n={n} P={b} R={r} sync={s}"
        );
    }
    assert_eq!(
        p(0, 1500, 1, true).epoch_ns(),
        Err(QjumpError::ZeroParameter)
    );
}

#[test]
fn rate_limits() {
    // f = 1 without sync: R / 2n = 1 Gbit/s / 8 = 125 Mbit/s (Equation 3);
    // f = 4 = n: R / 2.
    let q = p(4, 1500, 1_000_000_000, false);
    assert_eq!(q.rate_limit_bps(1), Ok(125_000_000));
    assert_eq!(q.rate_limit_bps(4), Ok(500_000_000));
    assert_eq!(
        q.rate_limit_bps(0),
        Err(QjumpError::BadFactor {
            factor: 0,
            hosts: 4
        })
    );
    assert_eq!(
        q.rate_limit_bps(5),
        Err(QjumpError::BadFactor {
            factor: 5,
            hosts: 4
        })
    );
    // 1000 hosts, 10 Gbit/s: 5 Mbit/s per host (the article's example).
    assert_eq!(
        p(1000, 1500, 10_000_000_000, false).rate_limit_bps(1),
        Ok(5_000_000)
    );
}

#[test]
fn answers() {
    let levels = [
        Level {
            priority: 7,
            factor: 1,
        },
        Level {
            priority: 6,
            factor: 2,
        },
        Level {
            priority: 5,
            factor: 4,
        },
    ];
    // (synchronized, σ, period, expected level, bound, guaranteed)
    let table: &[(bool, u32, u64, usize, u64, bool)] = &[
        (false, 1500, 96_000, 0, 96_000, true), // one packet per epoch: f = 1
        (true, 100, 48_000, 0, 48_000, true),   // synchronized: n·P/R
        (false, 100, 48_000, 1, 96_000, false), // two per epoch
        (false, 100, 30_000, 2, 96_000, false), // ⌈96/30⌉ = 4 per epoch
    ];
    for &(sync, load, period, level, bound, guaranteed) in table {
        let a = p(4, 1500, 1_000_000_000, sync)
            .answer(&levels, load, period)
            .expect("answer");
        assert_eq!(
            (a.level, a.bound_ns, a.guaranteed),
            (level, bound, guaranteed)
        );
        assert_eq!(a.factor, levels[level].factor);
    }
    let q = p(4, 1500, 1_000_000_000, false);
    assert_eq!(
        q.answer(&levels, 100, 10_000),
        Err(QjumpError::NoLevel { period_ns: 10_000 })
    );
    assert!(matches!(
        q.answer(&levels, 1501, 96_000),
        Err(QjumpError::PacketTooLarge { .. })
    ));
}
