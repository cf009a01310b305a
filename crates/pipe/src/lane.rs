//! The first pieces of 1Pipe's beacons on the express lane, sans I/O:
//! the beacon as it will ride in one lane chunk ([`LaneBeacon`]), and the
//! cap that keeps a beacon on the lane from overtaking data on the
//! regular path ([`BarrierCap`]). Not wired to the lane yet: the UDP
//! drivers still send beacons as 1Pipe packets (docs/pipe.md, "Still to
//! come").
//!
//! **Why a cap.** 1Pipe needs FIFO on each link: a barrier promises that
//! nothing older follows on that link. Beacons on the lane and data on
//! the regular path are two paths, and a beacon can overtake data sent
//! before it. The order still holds (the hop refuses a packet whose
//! barrier went back, a receiver refuses a late best-effort message, and
//! the commit barrier stays below anything unacknowledged), but the
//! overtaken packet is lost. So a beacon on the lane carries no more than
//! the barriers of the oldest regular packet sent within a window `W`:
//! regular packets faster than `W` are never overtaken, slower ones are
//! lost and reported, never misordered. With no regular packet in the
//! last `W`, the beacon carries the current barriers: the idle case
//! beacons exist for.

use crate::Nanos;

/// Bytes of a [`LaneBeacon`]: one 30-byte lane chunk holds it.
pub const LANE_BEACON_LEN: usize = 24;

/// A beacon on the lane: who sends it, the period it sends at (so the hop
/// scales its silence limit to it), and its barriers. Big-endian:
/// `src:u32 | period_us:u32 | barrier:u64 | commit:u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneBeacon {
    /// The sending process (or hop).
    pub src: u32,
    /// Its lane period, µs.
    pub period_us: u32,
    /// The best-effort barrier.
    pub barrier: u64,
    /// The commit barrier (never above `barrier`).
    pub commit: u64,
}

/// Why a lane beacon was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LaneBeaconError {
    /// Not [`LANE_BEACON_LEN`] bytes.
    #[error("a lane beacon is {LANE_BEACON_LEN} bytes, not {0}")]
    Length(usize),
    /// The commit barrier above the barrier.
    #[error("commit barrier {commit} above barrier {barrier}")]
    CommitAbove {
        /// The barrier.
        barrier: u64,
        /// The commit barrier.
        commit: u64,
    },
}

impl LaneBeacon {
    /// The encoding.
    pub fn encode(&self) -> [u8; LANE_BEACON_LEN] {
        let mut b = [0u8; LANE_BEACON_LEN];
        b[0..4].copy_from_slice(&self.src.to_be_bytes());
        b[4..8].copy_from_slice(&self.period_us.to_be_bytes());
        b[8..16].copy_from_slice(&self.barrier.to_be_bytes());
        b[16..24].copy_from_slice(&self.commit.to_be_bytes());
        b
    }

    /// Decodes exactly [`LANE_BEACON_LEN`] bytes.
    pub fn decode(b: &[u8]) -> Result<LaneBeacon, LaneBeaconError> {
        let b: &[u8; LANE_BEACON_LEN] =
            b.try_into().map_err(|_| LaneBeaconError::Length(b.len()))?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(x)
        };
        let m = LaneBeacon {
            src: u32_at(0),
            period_us: u32_at(4),
            barrier: u64_at(8),
            commit: u64_at(16),
        };
        if m.commit > m.barrier {
            return Err(LaneBeaconError::CommitAbove {
                barrier: m.barrier,
                commit: m.commit,
            });
        }
        Ok(m)
    }
}

/// Buckets over the window: a bucket per `W / BUCKETS`.
const BUCKETS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    /// The bucket's slot (time / width); `u64::MAX`: empty.
    slot: u64,
    /// The first (lowest) barriers sent in it.
    barrier: u64,
    commit: u64,
}

const EMPTY: Bucket = Bucket {
    slot: u64::MAX,
    barrier: 0,
    commit: 0,
};

/// The barriers of the regular packets sent in the last window, in
/// [`BUCKETS`] fixed buckets (no allocation): a lane beacon is capped at
/// the oldest of them. Conservative by up to one bucket: a packet sent
/// slightly more than `W` ago may still cap.
#[derive(Debug, Clone)]
pub struct BarrierCap {
    width: Nanos,
    buckets: [Bucket; BUCKETS],
}

impl BarrierCap {
    /// A cap over a window of `window_ns` (about the regular path's
    /// p99.9 delay).
    pub fn new(window_ns: Nanos) -> BarrierCap {
        BarrierCap {
            width: (window_ns / BUCKETS as u64).max(1),
            buckets: [EMPTY; BUCKETS],
        }
    }

    /// A regular packet carrying these barriers was sent at `now`
    /// (barriers never go back from one packet to the next).
    pub fn on_regular_sent(&mut self, now: Nanos, barrier: u64, commit: u64) {
        let slot = now / self.width;
        let b = &mut self.buckets[(slot % BUCKETS as u64) as usize];
        if b.slot != slot {
            *b = Bucket {
                slot,
                barrier,
                commit,
            };
        }
    }

    /// The barriers a lane beacon may carry at `now`, given the current
    /// ones.
    pub fn cap(&self, now: Nanos, barrier: u64, commit: u64) -> (u64, u64) {
        let slot = now / self.width;
        let oldest = slot.saturating_sub(BUCKETS as u64 - 1);
        self.buckets
            .iter()
            .filter(|b| b.slot != u64::MAX && b.slot >= oldest && b.slot <= slot)
            .fold((barrier, commit), |(x, y), b| {
                (x.min(b.barrier), y.min(b.commit))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_beacons_round_trip_and_refuse_table() {
        let m = LaneBeacon {
            src: 7,
            period_us: 100,
            barrier: 1_000,
            commit: 990,
        };
        assert_eq!(LaneBeacon::decode(&m.encode()), Ok(m));
        let mut bad = m.encode();
        // A commit barrier above the barrier.
        bad[16] = 0xff;
        bad[23] = 0xff;
        let cases: [(&[u8], LaneBeaconError); 3] = [
            (&[], LaneBeaconError::Length(0)),
            (&m.encode()[..23], LaneBeaconError::Length(23)),
            (
                &bad,
                LaneBeaconError::CommitAbove {
                    barrier: 1_000,
                    commit: u64::from_be_bytes([0xff, 0, 0, 0, 0, 0, 0x03, 0xff]),
                },
            ),
        ];
        for (b, want) in cases {
            assert_eq!(LaneBeacon::decode(b), Err(want), "{b:?}");
        }
    }

    /// Window 80, buckets of 10: (now, regular packet sent?, cap of the
    /// current barriers (b, b - 1) at now).
    #[test]
    fn the_cap_follows_the_oldest_regular_packet_in_the_window() {
        let mut c = BarrierCap::new(80);
        type Row = (Nanos, Option<(u64, u64)>, u64, (u64, u64));
        let rows: &[Row] = &[
            (0, None, 100, (100, 99)),            // nothing sent: no cap
            (5, Some((100, 99)), 120, (100, 99)), // capped at what is in flight
            (15, Some((110, 105)), 130, (100, 99)),
            (79, None, 150, (100, 99)),
            (80, None, 150, (110, 105)), // the first bucket left the window
            (95, None, 160, (160, 159)), // nothing in the window any more
            (96, Some((200, 190)), 210, (200, 190)),
            (97, Some((205, 195)), 210, (200, 190)), // same bucket: the first counts
        ];
        for (i, &(now, sent, b, want)) in rows.iter().enumerate() {
            if let Some((sb, sc)) = sent {
                c.on_regular_sent(now, sb, sc);
            }
            assert_eq!(c.cap(now, b, b - 1), want, "row {i}");
        }
    }
}
