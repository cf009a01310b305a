//! Tests of `xlane bench sven`.

use super::*;

#[test]
fn bad_settings_are_refused_with_the_reason() {
    let d = SvenBenchConfig::default;
    let bad = [
        SvenBenchConfig { workers: 0, ..d() },
        SvenBenchConfig {
            service_ns: 1_000,
            ..d()
        },
        SvenBenchConfig {
            workers: 64,
            service_ns: 10_000,
            ..d()
        },
        SvenBenchConfig {
            distributions: vec![],
            ..d()
        },
        SvenBenchConfig {
            curve_loads: vec![0.8, 0.7],
            ..d()
        },
        SvenBenchConfig {
            curve_loads: vec![0.0],
            ..d()
        },
        SvenBenchConfig {
            curve_seconds: 0.5,
            ..d()
        },
        SvenBenchConfig {
            steps: vec![Step {
                load: 1.0,
                seconds: 0,
            }],
            ..d()
        },
        SvenBenchConfig {
            steps: vec![],
            ..d()
        },
        SvenBenchConfig {
            period_ns: 0,
            ..d()
        },
    ];
    for c in bad {
        assert!(
            matches!(c.validate(), Err(SvenBenchError::Config(_))),
            "{c:?}"
        );
    }
    d().validate().unwrap();
}

#[test]
fn the_defaults_scale_sven_to_this_machine() {
    let c = SvenBenchConfig::default();
    assert_eq!(c.capacity_rps(), 8_000.0);
    // SVEN's 300 µs for 10 µs: 30·S̄.
    assert_eq!(c.slo().latency_ns, 15_000_000);
    let loads = c.loads_per_second();
    assert_eq!(loads.len(), 34);
    assert_eq!(loads.iter().filter(|&&l| l >= OVERLOAD).count(), 22);
    // Same mean for every shape.
    for s in [Shape::Fixed, Shape::Exp, Shape::Bimodal] {
        assert!((s.dist(500_000).mean_ns() - 500_000.0).abs() < 1.0, "{s:?}");
    }
}

#[test]
fn names_parse() {
    assert_eq!(
        "1.15:10".parse::<Step>(),
        Ok(Step {
            load: 1.15,
            seconds: 10
        })
    );
    assert!("1.15".parse::<Step>().is_err());
    assert!("x:1".parse::<Step>().is_err());
    assert_eq!("cap".parse::<Control>(), Ok(Control::Default));
    assert!("pid".parse::<Control>().is_err());
    assert_eq!("bimodal".parse::<Shape>(), Ok(Shape::Bimodal));
    assert!("normal".parse::<Shape>().is_err());
}

#[test]
fn floor_gaps_fall_in_their_second() {
    let g = |t: u64, len: u64| xlane_host::floor::Gap {
        start_realtime_ns: t,
        len_ns: len,
    };
    let rep = xlane_host::floor::FloorReport {
        core: 0,
        threshold_ns: 0,
        duration_ns: 0,
        stolen_ns: 0,
        stolen_fraction: 0.0,
        max_gap_ns: 0,
        gaps: vec![
            g(5, 1),
            g(1_000 + S, 7),
            g(1_000 + S + 9, 3),
            g(2 * S + 1_000, 9),
            g(1, 100),
        ],
        gaps_dropped: 0,
        steal_ticks_delta: 0,
    };
    // Gaps before the start (t = 1 < 1000) and past the end are left out.
    assert_eq!(gaps_per_second(&[rep], 1_000, 2), vec![0, 7]);
}

/// Degenerate runs go through the per-second analysis, the curve, the
/// targets, the text and both figures: a second or point without a
/// request shows "–", a verdict that needs what is missing is "n/a",
/// a percentile bounded only from below proves nothing within the SLO.
#[test]
fn degenerate_inputs_are_analysed_and_reported() {
    use xlane_lancet::TimelineBucket;
    let b = |sent: u64, answered: u64, lost: u64| TimelineBucket {
        sent,
        answered,
        dropped: 0,
        lost,
    };
    let cp = |samples: usize, lost: u64, pct: u64, achieved: f64| CurvePoint {
        load: 1.0,
        offered_rps: 1_000.0,
        achieved_rps: achieved,
        p99_ns: pct,
        slo_percentile_ns: pct,
        at_least: lost > 0,
        samples,
        lost,
        floor_max_gap_ns: 0,
        set_aside: vec![],
    };
    let cfg = SvenBenchConfig {
        distributions: vec![Shape::Exp],
        ..SvenBenchConfig::default()
    };
    let slo = cfg.slo();
    // (case, timeline, samples (sched, latency), loads, client gave up
    //  at, curve points; seconds without a percentile, pooled
    //  percentile, overshoot known, SLO-violating throughput known, the
    //  four targets' verdicts)
    type Case = (
        &'static str,
        Vec<TimelineBucket>,
        Vec<(u64, u64)>,
        Vec<f64>,
        u64,
        Vec<CurvePoint>,
        usize,
        Option<(u64, bool)>,
        bool,
        bool,
        [Option<bool>; 4],
    );
    let cases: Vec<Case> = vec![
        (
            "no timeline, no sample, no curve point",
            vec![],
            vec![],
            vec![],
            0,
            vec![],
            0,
            None,
            false,
            false,
            [None; 4],
        ),
        (
            "every request lost",
            vec![b(100, 0, 100); 3],
            vec![],
            vec![1.15; 3],
            5 * S,
            vec![cp(0, 100, DRAIN_NS, 0.0)],
            0,
            // 300 lost at 4, 3 and 2 s: rank 297 is one of second 0's.
            Some((4 * S, true)),
            true,
            true,
            [Some(false), None, Some(true), Some(false)],
        ),
        (
            "nothing sent in the overload",
            vec![b(0, 0, 0); 2],
            vec![],
            vec![1.15; 2],
            4 * S,
            vec![cp(0, 0, 0, 0.0), cp(0, 0, 0, 0.0)],
            2,
            None,
            false,
            false,
            [None; 4],
        ),
        (
            "one sample",
            vec![b(1, 1, 0)],
            vec![(0, 5_000)],
            vec![1.15],
            3 * S,
            vec![cp(1, 0, 5_000, 1.0)],
            0,
            Some((5_000, false)),
            true,
            true,
            [Some(true), Some(true), Some(false), Some(false)],
        ),
        (
            "the client gave up before the seconds ended",
            vec![b(10, 0, 10); 3],
            vec![],
            vec![1.15; 3],
            S / 2,
            vec![cp(0, 10, DRAIN_NS, 0.0)],
            0,
            Some((0, true)),
            true,
            true,
            [Some(false), None, None, Some(false)],
        ),
        (
            "samples scheduled past the timeline",
            vec![b(2, 2, 0)],
            vec![(0, 1_000), (5 * S, 1_000), (u64::MAX - 10, 100)],
            vec![0.6],
            3 * S,
            vec![cp(1, 0, 1_000, 1.0)],
            0,
            None,
            true,
            true,
            [None, None, None, Some(false)],
        ),
    ];
    let dir = std::env::temp_dir().join(format!("xlane-sven-degenerate-{}", std::process::id()));
    for (case, timeline, samples, loads, gave_up_ns, points, empty, pooled, o, v, holds) in cases {
        let a = analyze(&RunData {
            timeline: &timeline,
            samples: &samples,
            loads: &loads,
            slo,
            gave_up_ns,
            floor_gaps: &[],
            settle_s: 0,
        });
        assert_eq!(a.seconds.len(), timeline.len(), "{case}");
        let answered: u64 = a.seconds.iter().map(|x| x.samples).sum();
        assert!(answered <= samples.len() as u64, "{case}: {a:?}");
        let without = a.seconds.iter().filter(|x| !x.has_percentile()).count();
        assert_eq!(without, empty, "{case}: {a:?}");
        assert_eq!(a.settled_percentile, pooled, "{case}");
        let curve = curve_of(Shape::Exp, points, slo);
        assert_eq!(curve.slo_violating_rps.is_some(), v, "{case}: {curve:?}");
        let runs: Vec<ControllerRun> = [Control::None, Control::Aiad, Control::Default]
            .iter()
            .map(|c| ControllerRun {
                name: c.name().into(),
                distribution: Shape::Exp,
                seconds: a.seconds.clone(),
                settled_percentile_ns: a.settled_percentile.map(|p| p.0),
                settled_at_least: a.settled_percentile.is_some_and(|p| p.1),
                overshoot: overshoot(&a, slo),
                admission_drops: 0,
                floor_stolen: f64::NAN,
            })
            .collect();
        assert_eq!(runs[0].overshoot.is_some(), o, "{case}");
        let targets = seconds::targets(
            &seconds::DistResult {
                name: "exp",
                slo_violating_rps: curve.slo_violating_rps,
                none: Some(&a),
                aiad: Some(&a),
                default: Some(&a),
            },
            slo,
        );
        let got: Vec<Option<bool>> = targets.iter().map(|t| t.holds).collect();
        assert_eq!(got, holds, "{case}: {targets:?}");
        let r = SvenReport {
            config: cfg.clone(),
            slo: slo.to_string(),
            slo_ns: slo.latency_ns,
            capacity_rps: cfg.capacity_rps(),
            slo_violating_rps: curve
                .slo_violating_rps
                .map(|v| ("exp".to_string(), v))
                .into_iter()
                .collect(),
            curves: if curve.points.is_empty() {
                vec![]
            } else {
                vec![curve]
            },
            controllers: runs,
            targets,
            floor_stolen_max: 0.0,
            duration_s: 0.0,
        };
        let text = render(&r);
        // Every second without a percentile shows "–" in each of the
        // three runs' tables, and a missing overshoot or SLO-violating
        // throughput says so.
        let dashed = text.lines().filter(|l| l.contains("       –")).count();
        assert!(dashed >= 3 * empty, "{case}: {dashed} rows with –\n{text}");
        assert_eq!(
            text.contains("overshoot – (no second"),
            !o && !r.controllers.is_empty()
        );
        assert_eq!(
            text.contains("throughput – (no point has a sample)"),
            !v && !r.curves.is_empty(),
            "{case}\n{text}"
        );
        let [curve_png, steps_png] = plot(&r, &dir).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert!(curve_png.is_file() && steps_png.is_file(), "{case}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
