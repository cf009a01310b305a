//! Reading the output of `sockperf ping-pong`, for cross-checks.
//!
//! sockperf 3.x prints lines such as
//!
//! ```text
//! sockperf: Summary: Round trip is 33.686 usec
//! sockperf: Total 3097 observations; each percentile contains 30.97 observations
//! sockperf: ---> <MAX> observation = 1295.468
//! sockperf: ---> percentile 99.999 = 1295.468
//! sockperf: ---> percentile 50.000 =   28.793
//! sockperf: ---> <MIN> observation =   14.186
//! ```
//!
//! with ANSI colour codes around some of them. Values are in µs. Without
//! `--full-rtt` they are half round trips ("Summary: Latency is"); with it,
//! full round trips ("Summary: Round trip is"). [`parse`] strips the colour
//! codes, accepts any spacing, and converts everything to round-trip
//! nanoseconds.
//!
//! With `--full-log FILE` sockperf also writes every observation of the
//! measured interval as `packet, txTime(sec), rxTime(sec), rtt(usec)` rows;
//! [`parse_full_log`] reads the round trips from the two time columns, so
//! that observations of several runs can be pooled.

/// What [`parse`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct SockperfResult {
    /// `(percentile in percent, round trip in ns)`, as printed (highest first).
    pub percentiles: Vec<(f64, f64)>,
    /// Observations behind the percentiles.
    pub observations: Option<u64>,
    /// Mean round trip, ns.
    pub mean_rtt_ns: Option<f64>,
    /// Smallest and largest round trip, ns.
    pub min_rtt_ns: Option<f64>,
    /// Largest round trip, ns.
    pub max_rtt_ns: Option<f64>,
    /// The printed values were half round trips (no `--full-rtt`) and were doubled.
    pub doubled: bool,
    /// Messages sockperf counted as dropped (`# dropped messages = N`).
    pub dropped: Option<u64>,
    /// Messages it counted as duplicated.
    pub duplicated: Option<u64>,
    /// Messages it counted as out of order.
    pub out_of_order: Option<u64>,
}

/// Why the output could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SockperfParseError {
    /// sockperf got no reply at all ("No messages were received from the
    /// server"), so it printed no statistics.
    #[error("sockperf received no replies from the server")]
    NoReplies,
    /// No "Summary:" line: the run failed or the format is unknown.
    #[error("no 'Summary: Round trip is' / 'Summary: Latency is' line in sockperf's output")]
    NoSummary,
    /// No percentile lines.
    #[error("no 'percentile N = V' lines in sockperf's output")]
    NoPercentiles,
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            if it.peek() == Some(&'[') {
                it.next();
                // Skip parameters up to the final byte (a letter).
                for d in it.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn number_after(line: &str, marker: &str) -> Option<f64> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '=');
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e' || c == '+'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok().filter(|v: &f64| v.is_finite())
}

/// A count as printed: `None` for a negative or fractional number (garbled).
fn count_of(v: f64) -> Option<u64> {
    (v >= 0.0 && v.fract() == 0.0 && v < u64::MAX as f64).then_some(v as u64)
}

/// Parse sockperf's ping-pong output (stdout and stderr together is fine).
/// Garbled lines (a negative round trip or count, a percentile outside
/// (0, 100)) are skipped, as if not printed.
pub fn parse(output: &str) -> Result<SockperfResult, SockperfParseError> {
    let text = strip_ansi(output);
    let mut doubled = None;
    let mut mean = None;
    let mut percentiles = Vec::new();
    let (mut min, mut max, mut obs) = (None, None, None);
    let (mut dropped, mut duplicated, mut out_of_order) = (None, None, None);
    for line in text.lines() {
        if let Some(v) = number_after(line, "Summary: Round trip is") {
            doubled = Some(false);
            mean = Some(v);
        } else if let Some(v) = number_after(line, "Summary: Latency is") {
            doubled = Some(true);
            mean = Some(v);
        } else if line.contains("---> percentile") {
            let rest = &line[line.find("---> percentile").unwrap_or(0) + 15..];
            if let Some((p, v)) = rest.split_once('=') {
                if let (Ok(p), Ok(v)) = (p.trim().parse::<f64>(), v.trim().parse::<f64>()) {
                    if p > 0.0 && p < 100.0 && v.is_finite() && v >= 0.0 {
                        percentiles.push((p, v));
                    }
                }
            }
        } else if line.contains("<MAX> observation") {
            max = number_after(line, "<MAX> observation");
        } else if line.contains("<MIN> observation") {
            min = number_after(line, "<MIN> observation");
        } else if line.contains("# dropped messages") {
            let count = |m| number_after(line, m).and_then(count_of);
            dropped = count("# dropped messages");
            duplicated = count("# duplicated messages");
            out_of_order = count("# out-of-order messages");
        } else if let Some(v) = number_after(line, "Total") {
            if line.contains("observations") {
                obs = count_of(v);
            }
        }
    }
    if doubled.is_none() && text.contains("No messages were received") {
        return Err(SockperfParseError::NoReplies);
    }
    let doubled = doubled.ok_or(SockperfParseError::NoSummary)?;
    if percentiles.is_empty() {
        return Err(SockperfParseError::NoPercentiles);
    }
    let k = if doubled { 2e3 } else { 1e3 };
    Ok(SockperfResult {
        percentiles: percentiles.into_iter().map(|(p, v)| (p, v * k)).collect(),
        observations: obs,
        mean_rtt_ns: mean.map(|v| v * k),
        min_rtt_ns: min.map(|v| v * k),
        max_rtt_ns: max.map(|v| v * k),
        doubled,
        dropped,
        duplicated,
        out_of_order,
    })
}

/// Round trips (ns) from a `--full-log` file: `rxTime − txTime` of every
/// data row (rows that do not parse as four numbers are skipped; negative
/// or non-finite differences too).
pub fn parse_full_log(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 4 || f[0].parse::<u64>().is_err() {
            continue;
        }
        if let (Ok(tx), Ok(rx)) = (f[1].parse::<f64>(), f[2].parse::<f64>()) {
            let rtt = (rx - tx) * 1e9;
            if rtt.is_finite() && rtt >= 0.0 {
                out.push(rtt);
            }
        }
    }
    out
}

/// The version from `sockperf --version` (`sockperf, version 3.7-no.git`
/// gives `3.7-no.git`).
pub fn parse_version(output: &str) -> Option<String> {
    let text = strip_ansi(output);
    let rest = &text[text.find("version")? + "version".len()..];
    let v = rest.split_whitespace().next()?;
    (!v.is_empty()).then(|| v.to_string())
}

impl SockperfResult {
    /// The round trip at `percentile` (percent) if sockperf printed it, ns.
    pub fn at(&self, percentile: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(p, _)| (p - percentile).abs() < 1e-6)
            .map(|(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "sockperf: [2;35m== version #3.7-no.git == [0m
sockperf: [Total Run] RunTime=2.000 sec; Warm up time=400 msec; SentMessages=3999; ReceivedMessages=3998
sockperf: ========= Printing statistics for Server No: 0
sockperf: [Valid Duration] RunTime=1.548 sec; SentMessages=3097; ReceivedMessages=3097
sockperf: \x1b[2;35m====> avg-rtt=33.686 (std-dev=42.793)\x1b[0m
sockperf: # dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0
sockperf: Summary: Round trip is 33.686 usec
sockperf: \x1b[2;35mTotal 3097 observations\x1b[0m; each percentile contains 30.97 observations
sockperf: ---> <MAX> observation = 1295.468
sockperf: ---> percentile 99.999 = 1295.468
sockperf: ---> percentile 99.990 = 1295.468
sockperf: ---> percentile 99.900 =  856.185
sockperf: ---> percentile 99.000 =   74.870
sockperf: ---> percentile 90.000 =   44.844
sockperf: ---> percentile 75.000 =   31.298
sockperf: ---> percentile 50.000 =   28.793
sockperf: ---> percentile 25.000 =   27.040
sockperf: ---> <MIN> observation =   14.186
";

    #[test]
    fn full_rtt_output() {
        let r = parse(FULL).unwrap();
        assert!(!r.doubled);
        assert_eq!(r.observations, Some(3097));
        assert_eq!(r.percentiles.len(), 8);
        assert!((r.at(50.0).unwrap() - 28_793.0).abs() < 1e-6);
        assert!((r.at(99.0).unwrap() - 74_870.0).abs() < 1e-6);
        assert!((r.mean_rtt_ns.unwrap() - 33_686.0).abs() < 1e-6);
        assert!((r.min_rtt_ns.unwrap() - 14_186.0).abs() < 1e-6);
        assert!((r.max_rtt_ns.unwrap() - 1_295_468.0).abs() < 1e-6);
        assert_eq!(
            (r.dropped, r.duplicated, r.out_of_order),
            (Some(0), Some(0), Some(0))
        );
    }

    #[test]
    fn drop_counts_and_version() {
        let lossy = FULL.replace(
            "# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0",
            "# dropped messages = 7; # duplicated messages = 1; # out-of-order messages = 2",
        );
        let r = parse(&lossy).unwrap();
        assert_eq!(
            (r.dropped, r.duplicated, r.out_of_order),
            (Some(7), Some(1), Some(2))
        );
        let no_counts = FULL.replace("# dropped", "# lost");
        assert_eq!(parse(&no_counts).unwrap().dropped, None);
        assert_eq!(
            parse_version("sockperf, version 3.7-no.git\n   compiled 2021-08-23\n").as_deref(),
            Some("3.7-no.git")
        );
        assert_eq!(parse_version("command not found"), None);
    }

    #[test]
    fn half_rtt_output_is_doubled() {
        let half = FULL.replace("Summary: Round trip is", "Summary: Latency is");
        let r = parse(&half).unwrap();
        assert!(r.doubled);
        assert!((r.at(50.0).unwrap() - 57_586.0).abs() < 1e-6);
    }

    #[test]
    fn full_log_rows() {
        let log = "------------------------------
test was performed using the following parameters: --mps=1000 --full-rtt
sockperf: ---> percentile 50.000 =   58.118
packet, txTime(sec), rxTime(sec), rtt(usec)
0, 2.401971963, 2.402028969, 57.006
1, 2.402971959, 2.403033514, 61.555
x, 1, 2, 3
2, 2.5, 2.4, 1.0
------------------------------
";
        let r = parse_full_log(log);
        assert_eq!(r.len(), 2);
        assert!(
            (r[0] - 57_006.0).abs() < 1.0 && (r[1] - 61_555.0).abs() < 1.0,
            "{r:?}"
        );
        assert!(parse_full_log("").is_empty());
    }

    #[test]
    fn broken_outputs() {
        assert_eq!(parse(""), Err(SockperfParseError::NoSummary));
        let silent = "sockperf: Test ended\n\
                      sockperf: No messages were received from the server. Is the server down?\n";
        assert_eq!(parse(silent), Err(SockperfParseError::NoReplies));
        assert_eq!(
            parse("sockperf: Summary: Round trip is 3.0 usec\n"),
            Err(SockperfParseError::NoPercentiles)
        );
        // Garbage percentile lines are skipped, not fatal.
        let r = parse(
            "Summary: Round trip is 3 usec\n---> percentile x = y\n---> percentile 50.000 = 2.5\n",
        )
        .unwrap();
        assert_eq!(r.percentiles, vec![(50.0, 2500.0)]);
    }

    #[test]
    fn garbled_outputs() {
        use SockperfParseError::*;
        const SUMMARY: &str = "Summary: Round trip is 3 usec\n";
        // (output, percentiles parsed or the error, observations)
        let table: &[(&str, Result<usize, SockperfParseError>, Option<u64>)] = &[
            ("\u{1b}[", Err(NoSummary), None),
            ("\u{1b}[2;35", Err(NoSummary), None),
            (
                "Summary: Round trip is\n---> percentile 50 = 1\n",
                Err(NoSummary),
                None,
            ),
            (
                "Summary: Round trip is nan usec\n---> percentile 50 = 1\n",
                Err(NoSummary),
                None,
            ),
            (
                "Summary: Round trip is 3 usec\n---> percentile\n",
                Err(NoPercentiles),
                None,
            ),
            (
                "Summary: Round trip is 3 usec\n---> percentile 50 = -1\n",
                Err(NoPercentiles),
                None,
            ),
            (
                "Summary: Round trip is 3 usec\n---> percentile 150 = 1\n",
                Err(NoPercentiles),
                None,
            ),
            (
                "Summary: Round trip is 3 usec\n---> percentile 50 = inf\n",
                Err(NoPercentiles),
                None,
            ),
            (
                "Total -5 observations\n---> percentile 50 = 1\n",
                Ok(1),
                None,
            ),
            (
                "Total 2.5 observations\n---> percentile 50 = 1\n",
                Ok(1),
                None,
            ),
            (
                "Total 0 observations\n---> percentile 50 = 1\n",
                Ok(1),
                Some(0),
            ),
        ];
        for (i, &(out, ref want, obs)) in table.iter().enumerate() {
            let text = if out.starts_with("Total") {
                format!("{SUMMARY}{out}")
            } else {
                out.to_string()
            };
            match (parse(&text), want) {
                (Ok(r), Ok(n)) => {
                    assert_eq!(r.percentiles.len(), *n, "case {i}");
                    assert_eq!(r.observations, obs, "case {i}");
                }
                (Err(e), Err(w)) => assert_eq!(&e, w, "case {i}"),
                (got, _) => panic!("case {i}: {got:?}, wanted {want:?}"),
            }
        }
        let lossy =
            "# dropped messages = -3; # duplicated messages = 1.5; # out-of-order messages = 2\n";
        let r = parse(&format!("{SUMMARY}{lossy}---> percentile 50 = 1\n")).unwrap();
        assert_eq!(
            (r.dropped, r.duplicated, r.out_of_order),
            (None, None, Some(2))
        );
        // A log whose every row is garbled or runs backwards gives nothing.
        assert!(parse_full_log("0, 2.5, 2.4, 1\n1, x, 2, 3\n2, 1, 2\n").is_empty());
    }
}
