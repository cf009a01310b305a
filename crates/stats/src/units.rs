//! Durations written for people: the one format every report, table and
//! command line of xlane uses.

/// Nanoseconds with a unit and three or four significant digits:
/// `850ns`, `12.3µs`, `4.56ms`, `1.20s`.
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else {
        format!("{:.2}s", f / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_ns;

    #[test]
    fn each_unit_at_its_edges() {
        for (ns, text) in [
            (0, "0ns"),
            (999, "999ns"),
            (1_000, "1.0µs"),
            (12_345, "12.3µs"),
            (999_949, "999.9µs"),
            (1_000_000, "1.00ms"),
            (4_561_000, "4.56ms"),
            (25_000_000, "25.00ms"),
            (999_999_999, "1000.00ms"),
            (1_000_000_000, "1.00s"),
            (1_204_000_000, "1.20s"),
            (u64::MAX, "18446744073.71s"),
        ] {
            assert_eq!(fmt_ns(ns), text, "{ns}");
        }
    }
}
