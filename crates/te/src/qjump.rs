//! QJump levels (Grosvenor et al., ";login:" 2015), as an alternative way to
//! answer an allocation request.
//!
//! # Model
//!
//! With `n` hosts, maximum packet `P` bytes and slowest link rate `R` bit/s,
//! an initially idle network serves one packet from every host within
//! `n·8P/R` (the whole network seen as one big switch): that is the
//! worst-case queueing of the highest level when hosts' epochs are
//! synchronized. Without clock synchronization (mesochronous epochs) the
//! bound doubles, and QJump's **network epoch** is `2n·8P/R` (Equation 2).
//! [`QjumpParams::epoch_ns`] returns the one that applies.
//!
//! A **level** pairs a priority with a throughput factor `f`, `1 ≤ f ≤ n`:
//! each host may send `f` packets of `P` bytes per epoch on that level
//! (rate `f·8P/epoch` bit/s). Only `f = 1` is guaranteed to meet the epoch
//! bound; a level with `f > 1` meets it only while at most `n/f` hosts send
//! concurrently to one destination (its bound is statistical).
//!
//! [`QjumpParams::answer`] picks, for a packet size and period, the
//! highest-priority level (levels in priority order, first = highest) whose
//! per-host rate limit admits one packet of `σ ≤ P` every period, and
//! returns its latency bound.

/// Network parameters of QJump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QjumpParams {
    /// `n`: number of hosts.
    pub hosts: u32,
    /// `P`: maximum packet size, bytes.
    pub max_packet_bytes: u32,
    /// `R`: rate of the slowest link, bit/s.
    pub rate_bps: u64,
    /// Whether hosts' epochs are synchronized (then the bound is `n·P/R`,
    /// else `2n·P/R`).
    pub synchronized: bool,
}

/// A QJump level: a priority bound to a throughput factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// Switch priority of the level (informational; order of the level list
    /// is what `answer` uses).
    pub priority: u8,
    /// Throughput factor `f`, `1 ≤ f ≤ n`.
    pub factor: u32,
}

/// A request answered in QJump terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QjumpAnswer {
    /// Index of the chosen level in the list given.
    pub level: usize,
    /// The level's factor `f`.
    pub factor: u32,
    /// The level's per-host rate limit, bit/s.
    pub rate_limit_bps: u64,
    /// The network epoch, ns (the latency bound).
    pub bound_ns: u64,
    /// Whether the bound is guaranteed (`f = 1`) or statistical (`f > 1`).
    pub guaranteed: bool,
}

/// Invalid QJump parameters or an unanswerable request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QjumpError {
    /// `n`, `P` or `R` is zero.
    #[error("hosts, packet size and rate must all be > 0")]
    ZeroParameter,
    /// `f` outside `1..=n`.
    #[error("throughput factor {factor} outside 1..={hosts}")]
    BadFactor {
        /// The factor.
        factor: u32,
        /// `n`.
        hosts: u32,
    },
    /// The packet is larger than `P`.
    #[error("packet of {load_bytes} B larger than P = {max_packet_bytes} B")]
    PacketTooLarge {
        /// Requested size.
        load_bytes: u32,
        /// `P`.
        max_packet_bytes: u32,
    },
    /// No level's rate limit admits the period.
    #[error("no level admits one packet every {period_ns} ns")]
    NoLevel {
        /// Requested period.
        period_ns: u64,
    },
}

impl QjumpParams {
    fn check(&self) -> Result<(), QjumpError> {
        if self.hosts == 0 || self.max_packet_bytes == 0 || self.rate_bps == 0 {
            return Err(QjumpError::ZeroParameter);
        }
        Ok(())
    }

    /// `n·8P/R` in ns, rounded up (P/R time of one packet times n).
    fn n_p_over_r(&self) -> u64 {
        let bits = self.hosts as u128 * self.max_packet_bytes as u128 * 8 * 1_000_000_000;
        u64::try_from(bits.div_ceil(self.rate_bps.max(1) as u128)).unwrap_or(u64::MAX)
    }

    /// The network epoch, ns: `n·P/R` if synchronized, `2n·P/R` otherwise.
    pub fn epoch_ns(&self) -> Result<u64, QjumpError> {
        self.check()?;
        let base = self.n_p_over_r();
        Ok(if self.synchronized {
            base
        } else {
            base.saturating_mul(2)
        })
    }

    /// Per-host rate limit of a level with factor `f`: `f` packets of `P`
    /// per epoch, bit/s (rounded down).
    pub fn rate_limit_bps(&self, factor: u32) -> Result<u64, QjumpError> {
        let epoch = self.epoch_ns()?;
        if factor == 0 || factor > self.hosts {
            return Err(QjumpError::BadFactor {
                factor,
                hosts: self.hosts,
            });
        }
        let bits = factor as u128 * self.max_packet_bytes as u128 * 8 * 1_000_000_000;
        Ok(u64::try_from(bits / epoch.max(1) as u128).unwrap_or(u64::MAX))
    }

    /// Answer a request (one packet of `load_bytes` every `period_ns`) with
    /// the first level of `levels` (highest priority first) whose rate limit
    /// admits it: `f` packets per epoch, i.e. `period ≥ epoch / f`.
    pub fn answer(
        &self,
        levels: &[Level],
        load_bytes: u32,
        period_ns: u64,
    ) -> Result<QjumpAnswer, QjumpError> {
        let epoch = self.epoch_ns()?;
        if load_bytes > self.max_packet_bytes {
            return Err(QjumpError::PacketTooLarge {
                load_bytes,
                max_packet_bytes: self.max_packet_bytes,
            });
        }
        for (i, lv) in levels.iter().enumerate() {
            let rate = self.rate_limit_bps(lv.factor)?;
            // Packets per epoch the request needs: ⌈epoch / period⌉.
            let needed = epoch.div_ceil(period_ns.max(1));
            if needed <= lv.factor as u64 {
                return Ok(QjumpAnswer {
                    level: i,
                    factor: lv.factor,
                    rate_limit_bps: rate,
                    bound_ns: epoch,
                    guaranteed: lv.factor == 1,
                });
            }
        }
        Err(QjumpError::NoLevel { period_ns })
    }
}
