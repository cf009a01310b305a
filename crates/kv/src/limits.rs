//! Redis's limits on client connections, as the loop enforces them:
//! `maxclients` (a connection past it is answered
//! `-ERR max number of clients reached` and closed), `timeout` (a client
//! idle that many seconds is closed; 0: never) and
//! `client-output-buffer-limit` (a client whose unsent replies pass its
//! class's hard limit, or stay past the soft limit for the soft seconds,
//! is closed: a subscriber that stopped reading cannot fill the member's
//! memory). Sans-IO: the loop passes the time in.

use std::time::{Duration, Instant};

/// The reply to a connection past `maxclients`.
pub const ERR_MAX_CLIENTS: &str = "ERR max number of clients reached";

/// One class's output limit (0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputLimit {
    /// Bytes past which the client is closed at once.
    pub hard: u64,
    /// Bytes past which the client may stay only `soft_secs`.
    pub soft: u64,
    /// Seconds a client may stay past `soft`.
    pub soft_secs: u64,
}

/// The classes `client-output-buffer-limit` sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Clients that are neither replicas nor subscribers.
    pub normal: OutputLimit,
    /// Replicas (`slave`; an xlane member replicates through raft, so no
    /// client is one: kept for `CONFIG GET`).
    pub replica: OutputLimit,
    /// Clients subscribed to a channel or pattern.
    pub pubsub: OutputLimit,
}

impl Default for OutputLimits {
    /// Redis's defaults.
    fn default() -> Self {
        OutputLimits {
            normal: OutputLimit::default(),
            replica: OutputLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_secs: 60,
            },
            pubsub: OutputLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_secs: 60,
            },
        }
    }
}

/// Why a `client-output-buffer-limit` value was refused (Redis's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// Not groups of four words.
    #[error("Wrong number of arguments in buffer limit configuration.")]
    Arity,
    /// A class that is none of normal, replica (slave), pubsub.
    #[error("Invalid client class specified in buffer limit configuration.")]
    Class,
    /// A number that is not a memory amount or a count of seconds.
    #[error("Error in hard, soft or soft_seconds setting in buffer limit configuration.")]
    Number,
}

impl OutputLimits {
    /// `self` with the classes `text` names set (`class hard soft secs`,
    /// repeated; memory amounts may carry units, as `32mb`).
    pub fn merged(mut self, text: &str) -> Result<OutputLimits, LimitsError> {
        let words: Vec<&str> = text.split_ascii_whitespace().collect();
        if words.is_empty() || words.len() % 4 != 0 {
            return Err(LimitsError::Arity);
        }
        for g in words.chunks_exact(4) {
            let limit = OutputLimit {
                hard: parse_memory(g[1]).ok_or(LimitsError::Number)?,
                soft: parse_memory(g[2]).ok_or(LimitsError::Number)?,
                soft_secs: g[3].parse().map_err(|_| LimitsError::Number)?,
            };
            match g[0].to_ascii_lowercase().as_str() {
                "normal" => self.normal = limit,
                "slave" | "replica" => self.replica = limit,
                "pubsub" => self.pubsub = limit,
                _ => return Err(LimitsError::Class),
            }
        }
        Ok(self)
    }

    /// As `CONFIG GET` shows it: every class, in bytes.
    pub fn text(&self) -> String {
        let one =
            |name: &str, l: &OutputLimit| format!("{name} {} {} {}", l.hard, l.soft, l.soft_secs);
        format!(
            "{} {} {}",
            one("normal", &self.normal),
            one("slave", &self.replica),
            one("pubsub", &self.pubsub)
        )
    }
}

/// Where a client stands against its output limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputWatch {
    /// Since when it has been past the soft limit.
    soft_since: Option<Instant>,
}

impl OutputWatch {
    /// Checks `pending` unsent bytes against `limit` at `now`: whether the
    /// client must be closed.
    pub fn over(&mut self, limit: &OutputLimit, pending: u64, now: Instant) -> bool {
        if limit.hard > 0 && pending >= limit.hard {
            return true;
        }
        if limit.soft > 0 && pending >= limit.soft {
            let since = *self.soft_since.get_or_insert(now);
            return now.duration_since(since) >= Duration::from_secs(limit.soft_secs);
        }
        self.soft_since = None;
        false
    }
}

/// Descriptors a server keeps beside its clients' (Redis's
/// `CONFIG_MIN_RESERVED_FDS`).
const RESERVED_FDS: u64 = 32;

/// The limits of one loop, as its configuration sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// `maxclients`.
    pub maxclients: usize,
    /// `timeout`, in seconds (0: none).
    pub timeout: u64,
    /// `client-output-buffer-limit`.
    pub output: OutputLimits,
}

/// Makes room for `maxclients` clients in the process's open-file limit,
/// as Redis does at start: raises the soft limit (up to the hard one) to
/// `maxclients` plus the descriptors a server keeps for itself. Returns
/// the clients that fit, and the warning to log when that is fewer than
/// asked.
pub fn fit_maxclients(maxclients: u64) -> (u64, Option<String>) {
    let want = maxclients.saturating_add(RESERVED_FDS);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return (maxclients, None);
    }
    if lim.rlim_cur < want {
        let raised = libc::rlimit {
            rlim_cur: want.min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = raised.rlim_cur;
        }
    }
    if lim.rlim_cur >= want {
        return (maxclients, None);
    }
    let fit = lim.rlim_cur.saturating_sub(RESERVED_FDS).max(1);
    let warning = format!(
        "maxclients {maxclients} needs {want} open files but the limit is {} (ulimit -n): maxclients reduced to {fit}",
        lim.rlim_cur
    );
    (fit, Some(warning))
}

/// How long a client may stay before it can run a command: a TLS client in
/// its handshake, or a client that has not authenticated where the
/// `default` user needs a password. Past it the client is closed, whatever
/// `timeout` says: a connection that never gets that far only holds a
/// slot of `maxclients`.
pub const ADMISSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a client connected `since` and not admitted yet (TLS handshake
/// or `AUTH` outstanding) is past [`ADMISSION_TIMEOUT`] at `now`.
pub fn admission_past(admitted: bool, since: Instant, now: Instant) -> bool {
    !admitted && now.duration_since(since) >= ADMISSION_TIMEOUT
}

/// Whether a client idle since `last` is past `timeout_secs` at `now`
/// (0: never). Subscribers and blocked clients are exempt, as in Redis.
pub fn idle_past(timeout_secs: u64, last: Instant, now: Instant, exempt: bool) -> bool {
    timeout_secs > 0 && !exempt && now.duration_since(last) > Duration::from_secs(timeout_secs)
}

/// A memory amount: digits and an optional unit; `None` if it is none.
pub fn parse_memory(v: &str) -> Option<u64> {
    let lower = v.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit() && c != '-')
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let n: i64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    u64::try_from(n).ok()?.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_as_redis_takes_them() {
        let d = OutputLimits::default();
        let cases: [(&str, Result<&str, LimitsError>); 7] = [
            (
                "pubsub 1mb 512kb 10",
                Ok("normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 10"),
            ),
            (
                "normal 10 5 1 replica 0 0 0",
                Ok("normal 10 5 1 slave 0 0 0 pubsub 33554432 8388608 60"),
            ),
            (
                "PUBSUB 0 0 0",
                Ok("normal 0 0 0 slave 268435456 67108864 60 pubsub 0 0 0"),
            ),
            ("pubsub 1 2", Err(LimitsError::Arity)),
            ("", Err(LimitsError::Arity)),
            ("master 1 1 1", Err(LimitsError::Class)),
            ("pubsub 1x 1 1", Err(LimitsError::Number)),
        ];
        for (text, want) in cases {
            assert_eq!(
                d.merged(text).map(|l| l.text()),
                want.map(String::from),
                "{text:?}"
            );
        }
        assert_eq!(d.merged(&d.text()), Ok(d));
    }

    #[test]
    fn a_client_is_closed_past_hard_or_long_past_soft() {
        let limit = OutputLimit {
            hard: 100,
            soft: 10,
            soft_secs: 2,
        };
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // (pending bytes, seconds after t0, closed)
        let steps = [
            (5, 0, false),
            (50, 0, false),
            (50, 1, false),
            (5, 1, false), // back under soft: the clock starts over
            (50, 2, false),
            (50, 3, false),
            (50, 4, true),
            (100, 4, true),
        ];
        let mut w = OutputWatch::default();
        for (pending, at, closed) in steps {
            assert_eq!(
                w.over(&limit, pending, t0 + s(at)),
                closed,
                "{pending} at {at}s"
            );
        }
        assert!(OutputWatch::default().over(&limit, 100, t0));
        let none = OutputLimit::default();
        assert!(!OutputWatch::default().over(&none, u64::MAX, t0));
    }

    #[test]
    fn idle_clients_time_out_unless_exempt() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert!(!idle_past(0, t0, t0 + s(1000), false));
        assert!(!idle_past(5, t0, t0 + s(5), false));
        assert!(idle_past(5, t0, t0 + s(6), false));
        assert!(!idle_past(5, t0, t0 + s(6), true));
    }

    #[test]
    fn clients_not_admitted_are_closed_after_the_admission_timeout() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // (admitted, seconds since it connected, closed)
        for (admitted, after, closed) in [
            (false, 9, false),
            (false, 10, true),
            (false, 1000, true),
            (true, 1000, false),
        ] {
            assert_eq!(
                admission_past(admitted, t0, t0 + s(after)),
                closed,
                "{admitted} {after}"
            );
        }
    }
}
