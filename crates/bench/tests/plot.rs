//! Tests of the figure writers in `xlane_bench::plot`: files are written,
//! PNGs have the promised size, SVGs carry the names, and degenerate
//! inputs never panic.
//!
//! Set `XLANE_PLOT_OUT=<dir>` to keep the figures of `five_configurations`
//! for looking at them.

use std::path::{Path, PathBuf};

use xlane_bench::plot::{
    latency_cdf, outlier_timeseries, percentile_ladder, OutlierPoint, PlotError, Series, HEIGHT,
    WIDTH,
};

const SEED: u64 = 0x5eed_1a7e_0c0f_fee5;

/// SplitMix64: small, seeded, good enough for synthetic latencies.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// Latencies: a lognormal body around `median_ns` plus, with probability
/// `p_tail`, a heavy tail up to `tail_max_ns`. Sorted ascending.
fn synth(
    rng: &mut Rng,
    n: usize,
    median_ns: f64,
    sigma: f64,
    p_tail: f64,
    tail_max_ns: f64,
) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n)
        .map(|_| {
            let body = median_ns * (sigma * rng.normal()).exp();
            if rng.unit() < p_tail {
                // Log-uniform between the body and the tail maximum.
                let f = rng.unit();
                (body * (tail_max_ns / body).powf(f)) as u64
            } else {
                body as u64
            }
        })
        .collect();
    v.sort_unstable();
    v
}

/// A fresh directory for one test (removed by `Cleanup`).
fn out_dir(name: &str) -> (PathBuf, Cleanup) {
    if let Some(dir) = std::env::var_os("XLANE_PLOT_OUT") {
        let d = PathBuf::from(dir);
        return (d, Cleanup(None));
    }
    let d = std::env::temp_dir().join(format!("xlane-plot-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    (d.clone(), Cleanup(Some(d)))
}

struct Cleanup(Option<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(bytes.len() > 24, "{} too short", path.display());
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    assert_eq!(
        &bytes[12..16],
        b"IHDR",
        "{}: first chunk not IHDR",
        path.display()
    );
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

fn svg_text(path: &Path) -> String {
    let s =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(s.contains("<svg"), "{} is not an SVG", path.display());
    s
}

fn check_pair(paths: &[PathBuf; 2], stem: &Path, min_height: u32, must_contain: &[&str]) {
    let [png, svg] = paths;
    assert_eq!(png, &stem.with_extension("png"));
    assert_eq!(svg, &stem.with_extension("svg"));
    let (w, h) = png_size(png);
    assert_eq!(w, WIDTH, "{}", png.display());
    assert!(h >= min_height, "{}: height {h}", png.display());
    let text = svg_text(svg);
    for s in must_contain {
        assert!(text.contains(s), "{} lacks {s:?}", svg.display());
    }
}

fn outliers(rng: &mut Rng, configs: &[(&str, &[u64])], run_s: f64) -> Vec<OutlierPoint> {
    let causes = ["queueing", "host gap", "sender late", "loss", "unexplained"];
    let mut out = Vec::new();
    for (name, sorted) in configs {
        // The worst 0.5% (at most 2000) packets, at random times in the run.
        let k = (sorted.len() / 200).clamp(1, 2000).min(sorted.len());
        for &lat in &sorted[sorted.len() - k..] {
            let r = rng.unit();
            let cause = if r < 0.55 {
                causes[0]
            } else if r < 0.75 {
                causes[1]
            } else if r < 0.9 {
                causes[2]
            } else if r < 0.95 {
                causes[3]
            } else {
                causes[4]
            };
            out.push(OutlierPoint {
                config: name.to_string(),
                t_ns: (rng.unit() * run_s * 1e9) as u64,
                latency_ns: lat,
                cause: cause.to_string(),
            });
        }
    }
    out
}

#[test]
fn five_configurations() {
    let mut rng = Rng(SEED);
    eprintln!("seed {SEED:#x}");
    let snic = synth(&mut rng, 100_000, 4_133.0, 0.006, 0.0, 0.0);
    let com = synth(&mut rng, 100_000, 5_130.0, 0.02, 0.001, 5_650.0);
    let zero = synth(&mut rng, 100_000, 5_351.0, 0.03, 0.002, 8_247.0);
    let qjump = synth(&mut rng, 1_000_000, 7_702.0, 0.3, 0.012, 4.8e7);
    let dpdk = synth(&mut rng, 100_000, 8_904.0, 0.35, 0.011, 5.4e7);
    let configs: [(&str, &[u64]); 5] = [
        ("X-Lane SNIC", &snic),
        ("X-Lane COM", &com),
        ("X-Lane 0", &zero),
        ("QJump", &qjump),
        ("DPDK", &dpdk),
    ];
    let series: Vec<Series> = configs
        .iter()
        .map(|(name, v)| Series { name, sorted_ns: v })
        .collect();
    let names: Vec<&str> = configs.iter().map(|c| c.0).collect();
    let (dir, _cleanup) = out_dir("five");

    let title = "Latency distribution per configuration";
    let stem = dir.join("fig5-cdf");
    let paths = latency_cdf(&series, title, &stem).expect("cdf");
    check_pair(&paths, &stem, HEIGHT, &[&[title][..], &names].concat());

    let title = "Tail latency by number of nines";
    let stem = dir.join("fig6-ladder");
    let paths = percentile_ladder(&series, title, &stem).expect("ladder");
    check_pair(
        &paths,
        &stem,
        HEIGHT,
        &[&[title][..], &names, &["p99.999"]].concat(),
    );

    let title = "Worst outliers over the run";
    let pts = outliers(&mut rng, &configs, 600.0);
    let stem = dir.join("fig4-outliers");
    let paths = outlier_timeseries(&pts, title, &stem).expect("outliers");
    check_pair(
        &paths,
        &stem,
        HEIGHT,
        &[&[title][..], &names, &["queueing", "host gap"]].concat(),
    );
}

#[test]
fn degenerate_inputs_never_panic() {
    let single = [7_000u64];
    let equal = [5_000u64; 50];
    let zeros = [0u64; 10];
    let with_zero = [0u64, 1, 2, 3, 1_000, 1_000_000];
    let huge = [u64::MAX - 1, u64::MAX];
    let cases: Vec<(&str, Vec<Series>)> = vec![
        ("no-series", vec![]),
        (
            "one-empty",
            vec![Series {
                name: "empty",
                sorted_ns: &[],
            }],
        ),
        (
            "empty-and-full",
            vec![
                Series {
                    name: "empty",
                    sorted_ns: &[],
                },
                Series {
                    name: "equal",
                    sorted_ns: &equal,
                },
            ],
        ),
        (
            "single",
            vec![Series {
                name: "single",
                sorted_ns: &single,
            }],
        ),
        (
            "all-equal",
            vec![Series {
                name: "equal",
                sorted_ns: &equal,
            }],
        ),
        (
            "zeros",
            vec![Series {
                name: "zeros",
                sorted_ns: &zeros,
            }],
        ),
        (
            "with-zero",
            vec![Series {
                name: "with zero",
                sorted_ns: &with_zero,
            }],
        ),
        (
            "huge",
            vec![Series {
                name: "huge",
                sorted_ns: &huge,
            }],
        ),
        (
            "long-name",
            vec![Series {
                name: "a configuration with a very long name that cannot fit the legend column",
                sorted_ns: &with_zero,
            }],
        ),
    ];
    let (dir, _cleanup) = out_dir("edge");
    for (case, series) in &cases {
        let check = |r: Result<[PathBuf; 2], PlotError>, what: &str| match r {
            Ok(paths) => {
                let (w, h) = png_size(&paths[0]);
                assert!(w == WIDTH && h >= HEIGHT, "{case}/{what}: {w}x{h}");
                svg_text(&paths[1]);
            }
            // A typed error is acceptable; a panic is not.
            Err(e) => eprintln!("{case}/{what}: {e}"),
        };
        check(
            latency_cdf(series, case, &dir.join(format!("{case}-cdf"))),
            "cdf",
        );
        check(
            percentile_ladder(series, case, &dir.join(format!("{case}-ladder"))),
            "ladder",
        );
        let pts: Vec<OutlierPoint> = series
            .iter()
            .flat_map(|s| {
                s.sorted_ns.iter().enumerate().map(|(i, &l)| OutlierPoint {
                    config: s.name.to_string(),
                    t_ns: i as u64,
                    latency_ns: l,
                    cause: if i % 2 == 0 { "loss" } else { "something new" }.to_string(),
                })
            })
            .collect();
        check(
            outlier_timeseries(&pts, case, &dir.join(format!("{case}-outliers"))),
            "outliers",
        );
    }
}

#[test]
fn the_figures_say_so_when_there_is_no_data() {
    let (dir, _cleanup) = out_dir("nodata");
    let paths = latency_cdf(&[], "nothing", &dir.join("cdf")).expect("empty cdf is a valid plot");
    assert!(svg_text(&paths[1]).contains("no samples"));
    let paths = percentile_ladder(&[], "nothing", &dir.join("ladder")).expect("empty ladder");
    assert!(svg_text(&paths[1]).contains("not enough samples"));
    let paths = outlier_timeseries(&[], "nothing", &dir.join("outliers")).expect("no outliers");
    assert!(svg_text(&paths[1]).contains("no outliers"));
}

#[test]
fn ladder_leaves_out_percentiles_without_enough_samples() {
    // 150 samples: p50, p90, p99 are shown, p99.9 and beyond are not.
    let v: Vec<u64> = (1..=150).map(|i| i * 1_000).collect();
    let (dir, _cleanup) = out_dir("ladder");
    let s = [Series {
        name: "short run",
        sorted_ns: &v,
    }];
    let paths = percentile_ladder(&s, "short", &dir.join("ladder")).expect("ladder");
    let svg = svg_text(&paths[1]);
    // The legend names the highest percentile drawn and its value
    // (nearest rank: ⌈0.99·150⌉ = 149th sample).
    assert!(
        svg.contains("p99 = 149 µs"),
        "legend lacks the last drawn percentile"
    );
}

#[test]
fn bad_stem_is_a_typed_error() {
    let s = [Series {
        name: "x",
        sorted_ns: &[1, 2, 3],
    }];
    for stem in ["", "/", ".."] {
        match latency_cdf(&s, "t", Path::new(stem)) {
            Err(PlotError::BadStem(_)) => {}
            other => panic!("stem {stem:?}: {other:?}"),
        }
    }
}

#[test]
fn missing_output_directory_is_created() {
    let (dir, _cleanup) = out_dir("mkdir");
    let stem = dir.join("a").join("b").join("fig");
    let s = [Series {
        name: "x",
        sorted_ns: &[1_000, 2_000, 3_000],
    }];
    let paths = latency_cdf(&s, "nested", &stem).expect("nested dirs");
    assert!(paths.iter().all(|p| p.exists()));
}
