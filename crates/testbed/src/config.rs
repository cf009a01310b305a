//! Testbed configuration, its validation, and link-rate parsing.

use serde::{Deserialize, Serialize};

/// DSCP "Expedited Forwarding" (46): the default express lane marking.
pub const DSCP_EF: u8 = 46;
/// DSCP "Class Selector 5" (40): the default second express sub-lane.
pub const DSCP_CS5: u8 = 40;
/// The project's prefix marker: every generated prefix is `xl` followed by
/// six lowercase hex digits (`down_all` recognises leftovers by this shape).
pub const PREFIX_MARKER: &str = "xl";
/// Longest prefix accepted, so that `<prefix>-p15` still fits the kernel's
/// 15-character interface-name limit.
pub const MAX_PREFIX_LEN: usize = 11;
/// Most hosts a testbed can have.
pub const MAX_HOSTS: usize = 16;
/// Fewest hosts a testbed can have.
pub const MIN_HOSTS: usize = 2;

/// The IP TOS byte that carries a DSCP value (ECN bits zero).
pub fn dscp_to_tos(dscp: u8) -> u8 {
    dscp << 2
}

/// Everything `Testbed::up` needs. `Default` gives 4 hosts at 1 Gbit/s.
///
/// Queues are counted in packets (`pfifo`): a 1000-packet best-effort queue
/// at 1 Gbit/s holds 12 ms of full-size frames, in the range of a shallow
/// datacenter switch buffer; the express queue (64 packets) only has to
/// absorb bursts of coordination messages.
///
/// In TOML (the state file) every field is written; an absent `Option`
/// field reads back as `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestbedConfig {
    /// Number of emulated hosts (`MIN_HOSTS..=MAX_HOSTS`).
    pub hosts: usize,
    /// Rate of every switch egress port (switch → host), bits per second.
    pub link_rate_bps: u64,
    /// Rate of every host NIC egress (host → switch), bits per second;
    /// `None` means the same as `link_rate_bps`. Note that with equal rates a
    /// single sender cannot congest a switch port (its own NIC shapes it to
    /// the port rate first): congest a port with two senders, or give hosts
    /// a faster NIC than the switch port.
    pub host_rate_bps: Option<u64>,
    /// `pfifo` length of each express class, packets.
    pub express_queue_pkts: u32,
    /// `pfifo` length of the best-effort class, packets.
    pub best_effort_queue_pkts: u32,
    /// DSCP of the first express sub-lane (HTB prio 0). Default EF (46).
    pub express_dscp: u8,
    /// DSCP of the second express sub-lane (HTB prio 1); `None` disables the
    /// sub-lane (best effort then has prio 1). Default CS5 (40).
    pub express2_dscp: Option<u8>,
    /// Guaranteed rate of each express class, percent of the link rate (its
    /// ceiling is always the full link rate). Best effort is guaranteed the
    /// rest and may also borrow up to the link rate.
    pub express_rate_percent: u8,
    /// HTB burst, as the time to send it at the class rate, in nanoseconds;
    /// never less than two full-size frames. Smaller is closer to a wire but
    /// costs more timer interrupts.
    pub burst_ns: u64,
    /// Prefix of every namespace and link name; `None` picks `xl` + six
    /// random hex digits. A given prefix must be 1..=11 characters of
    /// `[a-z0-9]`, starting with a letter.
    pub prefix: Option<String>,
    /// UDP probes per host pair for the idle latency measurement at `up`
    /// (0 skips it and leaves the topology's latencies unmeasured).
    pub measure_probes: usize,
    /// Split every shaped egress by the CPU that sends or forwards a
    /// packet: the lane core's packets take the device's second transmit
    /// queue and their own HTB (the one the controller programs), every
    /// other core's the first queue and a twin HTB (XPS chooses). So the
    /// lane core never runs the best-effort classes' shaping and its
    /// timers, as a lane core with its own NIC queue would not. `None`
    /// (or a one-CPU machine): one HTB per egress.
    pub lane_core: Option<usize>,
}

impl Default for TestbedConfig {
    fn default() -> Self {
        TestbedConfig {
            hosts: 4,
            link_rate_bps: 1_000_000_000,
            host_rate_bps: None,
            express_queue_pkts: 64,
            best_effort_queue_pkts: 1000,
            express_dscp: DSCP_EF,
            express2_dscp: Some(DSCP_CS5),
            express_rate_percent: 10,
            burst_ns: 50_000,
            prefix: None,
            measure_probes: 2000,
            lane_core: None,
        }
    }
}

/// Why a `TestbedConfig` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Host count outside `MIN_HOSTS..=MAX_HOSTS`.
    #[error("hosts must be between {MIN_HOSTS} and {MAX_HOSTS}, got {0}")]
    Hosts(usize),
    /// A rate of zero.
    #[error("{0} must be greater than 0")]
    ZeroRate(&'static str),
    /// A queue length of zero.
    #[error("{0} must be at least 1 packet")]
    ZeroQueue(&'static str),
    /// A DSCP above 63.
    #[error("DSCP must be 0..=63, got {0}")]
    Dscp(u8),
    /// The express DSCP is 0 (would catch all unmarked traffic) or both
    /// sub-lanes share one DSCP.
    #[error("express DSCPs must be non-zero and distinct (got {0} and {1:?})")]
    DscpClash(u8, Option<u8>),
    /// Express classes would be guaranteed all of the link (or none).
    #[error("express_rate_percent must leave room for best effort: 1..={max}, got {got}")]
    ExpressPercent {
        /// The value given.
        got: u8,
        /// The largest value allowed with this many express classes.
        max: u8,
    },
    /// `burst_ns` outside 1 µs ..= 1 s.
    #[error("burst_ns must be between 1000 (1 µs) and 1000000000 (1 s), got {0}")]
    Burst(u64),
    /// A bad prefix.
    #[error("bad prefix {prefix:?}: {reason}")]
    Prefix {
        /// The prefix given.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl TestbedConfig {
    /// Check every field; `Testbed::up` calls this first.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_HOSTS..=MAX_HOSTS).contains(&self.hosts) {
            return Err(ConfigError::Hosts(self.hosts));
        }
        if self.link_rate_bps == 0 {
            return Err(ConfigError::ZeroRate("link_rate_bps"));
        }
        if self.host_rate_bps == Some(0) {
            return Err(ConfigError::ZeroRate("host_rate_bps"));
        }
        if self.express_queue_pkts == 0 {
            return Err(ConfigError::ZeroQueue("express_queue_pkts"));
        }
        if self.best_effort_queue_pkts == 0 {
            return Err(ConfigError::ZeroQueue("best_effort_queue_pkts"));
        }
        for d in std::iter::once(self.express_dscp).chain(self.express2_dscp) {
            if d > 63 {
                return Err(ConfigError::Dscp(d));
            }
        }
        if self.express_dscp == 0
            || self.express2_dscp == Some(0)
            || self.express2_dscp == Some(self.express_dscp)
        {
            return Err(ConfigError::DscpClash(
                self.express_dscp,
                self.express2_dscp,
            ));
        }
        let classes: u8 = if self.express2_dscp.is_some() { 2 } else { 1 };
        let max = 99 / classes;
        if self.express_rate_percent == 0 || self.express_rate_percent > max {
            return Err(ConfigError::ExpressPercent {
                got: self.express_rate_percent,
                max,
            });
        }
        if !(1_000..=1_000_000_000).contains(&self.burst_ns) {
            return Err(ConfigError::Burst(self.burst_ns));
        }
        if let Some(p) = &self.prefix {
            validate_prefix(p)?;
        }
        Ok(())
    }

    /// The host NIC rate in effect.
    pub fn effective_host_rate_bps(&self) -> u64 {
        self.host_rate_bps.unwrap_or(self.link_rate_bps)
    }
}

/// Check a user-given prefix (see `TestbedConfig::prefix`).
pub fn validate_prefix(p: &str) -> Result<(), ConfigError> {
    let bad = |reason| {
        Err(ConfigError::Prefix {
            prefix: p.to_string(),
            reason,
        })
    };
    if p.is_empty() {
        return bad("empty");
    }
    if p.len() > MAX_PREFIX_LEN {
        return bad("longer than 11 characters (interface names are limited to 15)");
    }
    if !p
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return bad("only a-z and 0-9 are allowed");
    }
    if !p.as_bytes()[0].is_ascii_lowercase() {
        return bad("must start with a letter");
    }
    Ok(())
}

/// True when `p` has the shape of a generated prefix: `xl` + 6 hex digits.
pub fn is_generated_prefix(p: &str) -> bool {
    p.len() == 8
        && p.starts_with(PREFIX_MARKER)
        && p.as_bytes()[2..]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

/// Why a rate string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad rate {input:?}: {reason} (examples: 1gbit, 200mbit, 500k, 1000000)")]
pub struct ParseRateError {
    /// The text given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Parse a rate in bits per second: a number (decimals allowed) with an
/// optional decimal unit `k`/`kbit`, `m`/`mbit`, `g`/`gbit`, `t`/`tbit`, or
/// `bit` (case-insensitive). Byte units (`bps`, `kbps`, ...) are refused
/// because `tc` reads them as bytes while many people read them as bits.
pub fn parse_rate(s: &str) -> Result<u64, ParseRateError> {
    let err = |reason| ParseRateError {
        input: s.to_string(),
        reason,
    };
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(err("no number"));
    }
    let mult: f64 = match unit.trim() {
        "" | "bit" => 1.0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        "t" | "tbit" => 1e12,
        u if u.ends_with("bps") || u.ends_with('b') => {
            return Err(err("byte units are ambiguous; use bit units such as mbit"))
        }
        _ => return Err(err("unknown unit")),
    };
    let v: f64 = num.parse().map_err(|_| err("not a number"))?;
    let bits = v * mult;
    if !bits.is_finite() || bits < 1.0 {
        return Err(err("must be at least 1 bit/s"));
    }
    if bits > 1e15 {
        return Err(err("too large"));
    }
    Ok(bits.round() as u64)
}

/// Format a rate for humans and for `tc` (which accepts every output).
pub fn format_rate(bps: u64) -> String {
    for (unit, div) in [
        ("gbit", 1_000_000_000u64),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
    ] {
        if bps >= div && bps % div == 0 {
            return format!("{}{unit}", bps / div);
        }
    }
    format!("{bps}bit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse() {
        let table: &[(&str, Option<u64>)] = &[
            ("1gbit", Some(1_000_000_000)),
            ("200mbit", Some(200_000_000)),
            ("500k", Some(500_000)),
            ("500K", Some(500_000)),
            ("1.5g", Some(1_500_000_000)),
            ("1000000", Some(1_000_000)),
            ("64bit", Some(64)),
            (" 10 mbit ", Some(10_000_000)),
            ("10mbps", None),
            ("10mb", None),
            ("mbit", None),
            ("", None),
            ("0", None),
            ("1.2.3m", None),
            ("5x", None),
            ("-5m", None),
        ];
        for (input, want) in table {
            assert_eq!(parse_rate(input).ok(), *want, "input {input:?}");
        }
    }

    #[test]
    fn rates_format_round_trip() {
        for bps in [
            1,
            999,
            1000,
            1500,
            100_000_000,
            1_000_000_000,
            2_500_000_000,
        ] {
            assert_eq!(parse_rate(&format_rate(bps)).ok(), Some(bps), "{bps}");
        }
        assert_eq!(format_rate(1_000_000_000), "1gbit");
        assert_eq!(format_rate(2_500_000_000), "2500mbit");
    }

    #[test]
    fn config_validation() {
        let ok = TestbedConfig::default();
        assert_eq!(ok.validate(), Ok(()));
        let cases: Vec<(TestbedConfig, &str)> = vec![
            (
                TestbedConfig {
                    hosts: 1,
                    ..ok.clone()
                },
                "hosts",
            ),
            (
                TestbedConfig {
                    hosts: 17,
                    ..ok.clone()
                },
                "hosts",
            ),
            (
                TestbedConfig {
                    link_rate_bps: 0,
                    ..ok.clone()
                },
                "link_rate",
            ),
            (
                TestbedConfig {
                    host_rate_bps: Some(0),
                    ..ok.clone()
                },
                "host_rate",
            ),
            (
                TestbedConfig {
                    express_queue_pkts: 0,
                    ..ok.clone()
                },
                "express_queue",
            ),
            (
                TestbedConfig {
                    best_effort_queue_pkts: 0,
                    ..ok.clone()
                },
                "best_effort",
            ),
            (
                TestbedConfig {
                    express_dscp: 64,
                    ..ok.clone()
                },
                "DSCP",
            ),
            (
                TestbedConfig {
                    express_dscp: 0,
                    ..ok.clone()
                },
                "distinct",
            ),
            (
                TestbedConfig {
                    express2_dscp: Some(46),
                    ..ok.clone()
                },
                "distinct",
            ),
            (
                TestbedConfig {
                    express_rate_percent: 0,
                    ..ok.clone()
                },
                "percent",
            ),
            (
                TestbedConfig {
                    express_rate_percent: 50,
                    ..ok.clone()
                },
                "percent",
            ),
            (
                TestbedConfig {
                    prefix: Some("Bad".into()),
                    ..ok.clone()
                },
                "prefix",
            ),
            (
                TestbedConfig {
                    prefix: Some("abcdefghijkl".into()),
                    ..ok.clone()
                },
                "prefix",
            ),
            (
                TestbedConfig {
                    prefix: Some("1abc".into()),
                    ..ok.clone()
                },
                "prefix",
            ),
        ];
        for (cfg, what) in cases {
            let e = cfg.validate().expect_err(what);
            assert!(e.to_string().contains(what), "{e} should mention {what}");
        }
        let one_lane = TestbedConfig {
            express2_dscp: None,
            express_rate_percent: 90,
            ..ok
        };
        assert_eq!(one_lane.validate(), Ok(()));
    }

    #[test]
    fn toml_round_trip_keeps_none() {
        for cfg in [
            TestbedConfig::default(),
            TestbedConfig {
                express2_dscp: None,
                host_rate_bps: Some(5),
                prefix: Some("abc".into()),
                ..TestbedConfig::default()
            },
        ] {
            let text = toml::to_string(&cfg).unwrap();
            let back: TestbedConfig = toml::from_str(&text).unwrap();
            assert_eq!(back, cfg, "{text}");
        }
    }

    #[test]
    fn prefixes() {
        assert!(is_generated_prefix("xl0a1b2c"));
        assert!(!is_generated_prefix("xl0a1b2"));
        assert!(!is_generated_prefix("xl0a1b2g"));
        assert!(!is_generated_prefix("xy0a1b2c"));
        assert!(validate_prefix("xl0a1b2c").is_ok());
        assert!(validate_prefix("abcdefghijk").is_ok());
    }

    #[test]
    fn tos() {
        assert_eq!(dscp_to_tos(DSCP_EF), 0xb8);
        assert_eq!(dscp_to_tos(DSCP_CS5), 0xa0);
    }
}
