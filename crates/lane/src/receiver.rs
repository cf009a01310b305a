//! The periodic receiver: validation, delivery, loss/reorder accounting.

use crate::{Nanos, TunnelParams};
use xlane_wire::{Frame, FrameError, Schema};

/// Sequence numbers remembered behind the highest one (duplicate and reorder
/// detection); older frames are refused as stale.
pub const SEQ_WINDOW: u64 = 128;

/// One chunk handed to the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery<'a> {
    /// Producer id.
    pub producer: u8,
    /// The chunk's data (borrowed from the datagram).
    pub data: &'a [u8],
    /// Sequence number of the frame.
    pub seq: u64,
    /// Arrival time of the datagram.
    pub rx_time: Nanos,
    /// Send time written by the sender.
    pub send_time: Nanos,
}

/// What one accepted frame carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxFrame {
    /// Sequence number.
    pub seq: u64,
    /// Sender's timestamp.
    pub send_time: Nanos,
    /// Arrival time given by the caller.
    pub rx_time: Nanos,
    /// `rx_time − send_time` (signed: the clocks are different).
    pub latency_ns: i64,
    /// Chunks delivered.
    pub chunks: usize,
    /// Chunks refused (CRC, length, padding); the rest were delivered.
    pub bad_chunks: usize,
}

/// Why a datagram was refused as a whole (nothing delivered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RxError {
    /// Larger than σ.
    #[error("{len} B datagram exceeds the tunnel's {max} B")]
    Oversized {
        /// Datagram length.
        len: usize,
        /// σ.
        max: usize,
    },
    /// Not a valid lane frame.
    #[error("malformed frame: {0}")]
    Malformed(#[from] FrameError),
    /// A frame of another tunnel.
    #[error("frame of tunnel {got}, expected {want}")]
    WrongTunnel {
        /// Tunnel in the frame.
        got: u32,
        /// This receiver's tunnel.
        want: u32,
    },
    /// A frame of another schema than the tunnel's.
    #[error("frame schema {got:?}, tunnel uses {want:?}")]
    WrongSchema {
        /// Schema in the frame.
        got: Schema,
        /// The tunnel's schema.
        want: Schema,
    },
    /// This sequence number was already accepted.
    #[error("duplicate frame {seq}")]
    Duplicate {
        /// Sequence number.
        seq: u64,
    },
    /// Older than the duplicate-detection window.
    #[error("stale frame {seq} (highest {highest})")]
    Stale {
        /// Sequence number.
        seq: u64,
        /// Highest accepted sequence number.
        highest: u64,
    },
}

/// Counters of a receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Frames accepted.
    pub frames: u64,
    /// Chunks delivered.
    pub chunks: u64,
    /// Sequence numbers missing between the lowest and highest accepted ones
    /// (a late frame that fills a gap takes its number back out).
    pub lost: u64,
    /// Frames accepted after a frame with a higher sequence number.
    pub reordered: u64,
    /// Frames refused as duplicates.
    pub duplicates: u64,
    /// Frames refused as older than the window.
    pub stale: u64,
    /// Chunks refused inside accepted frames.
    pub bad_chunks: u64,
    /// Datagrams that were not lane frames.
    pub malformed: u64,
    /// Datagrams larger than σ.
    pub oversized: u64,
    /// Frames of another tunnel.
    pub wrong_tunnel: u64,
    /// Frames of another schema.
    pub wrong_schema: u64,
    /// Accepted frames that arrived less than `π − tolerance` after the previous
    /// accepted one (a sender over its rate, or jitter); still delivered.
    pub too_fast: u64,
}

/// What the window says about a sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SeqClass {
    /// Accept; `gap` numbers were skipped (now counted lost); `filled` if it
    /// filled a gap counted before; `reordered` if a higher number came first.
    Accept {
        gap: u64,
        filled: bool,
        reordered: bool,
    },
    Duplicate,
    Stale {
        highest: u64,
    },
}

/// Fixed bitmap of the last [`SEQ_WINDOW`] sequence numbers.
#[derive(Clone, Copy, Debug, Default)]
struct SeqWindow {
    /// (highest accepted, lowest accepted still tracked)
    range: Option<(u64, u64)>,
    /// Bit `i` set: `highest − i` was accepted.
    bits: u128,
}

impl SeqWindow {
    fn classify_and_record(&mut self, seq: u64) -> SeqClass {
        let Some((highest, lowest)) = self.range else {
            self.range = Some((seq, seq));
            self.bits = 1;
            return SeqClass::Accept {
                gap: 0,
                filled: false,
                reordered: false,
            };
        };
        if seq > highest {
            let shift = seq - highest;
            self.bits = if shift >= SEQ_WINDOW {
                1
            } else {
                (self.bits << shift) | 1
            };
            self.range = Some((seq, lowest));
            return SeqClass::Accept {
                gap: shift - 1,
                filled: false,
                reordered: false,
            };
        }
        let d = highest - seq;
        if d >= SEQ_WINDOW {
            return SeqClass::Stale { highest };
        }
        let bit = 1u128 << d;
        if self.bits & bit != 0 {
            return SeqClass::Duplicate;
        }
        self.bits |= bit;
        if seq < lowest {
            // Older than anything seen: the numbers in between were never counted
            // lost; they are now (this one itself is not a gap fill).
            self.range = Some((highest, seq));
            SeqClass::Accept {
                gap: lowest - seq - 1,
                filled: false,
                reordered: true,
            }
        } else {
            SeqClass::Accept {
                gap: 0,
                filled: true,
                reordered: true,
            }
        }
    }
}

/// Periodic receiver for one tunnel.
///
/// The caller stamps the arrival time **first** and passes it with the bytes;
/// [`handle_datagram`](Self::handle_datagram) validates the frame, delivers its
/// good chunks through a callback, and updates counters. Multicast receivers use
/// the same type.
pub struct PeriodicReceiver {
    params: TunnelParams,
    window: SeqWindow,
    last_rx: Option<Nanos>,
    tolerance: Nanos,
    stats: ReceiverStats,
}

impl PeriodicReceiver {
    /// A receiver with the default too-fast tolerance of π/4.
    pub fn new(params: TunnelParams) -> Self {
        Self::with_tolerance(params, params.period_ns / 4)
    }

    /// A receiver that counts frames closer than `π − tolerance` as too fast.
    pub fn with_tolerance(params: TunnelParams, tolerance: Nanos) -> Self {
        PeriodicReceiver {
            params,
            window: SeqWindow::default(),
            last_rx: None,
            tolerance,
            stats: ReceiverStats::default(),
        }
    }

    /// The tunnel parameters.
    pub fn params(&self) -> TunnelParams {
        self.params
    }

    /// Forgets the sequence history (e.g. after the sender restarted); counters stay.
    pub fn reset_sequence(&mut self) {
        self.window = SeqWindow::default();
        self.last_rx = None;
    }

    /// Handles one datagram that arrived at `rx_time`.
    ///
    /// Order of checks: size ≤ σ, frame header ([`Frame::new_checked`]), tunnel,
    /// schema, sequence (duplicate/stale). Then every good chunk is passed to
    /// `deliver`, in frame order; a bad chunk is counted and skipped, the others
    /// are still delivered.
    ///
    /// No allocation; bounded work: one header check and ≤ 55 chunk checks.
    pub fn handle_datagram(
        &mut self,
        rx_time: Nanos,
        bytes: &[u8],
        deliver: &mut dyn FnMut(Delivery<'_>),
    ) -> Result<RxFrame, RxError> {
        if bytes.len() > self.params.max_packet {
            self.stats.oversized += 1;
            return Err(RxError::Oversized {
                len: bytes.len(),
                max: self.params.max_packet,
            });
        }
        let frame = match Frame::new_checked(bytes) {
            Ok(f) => f,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(RxError::Malformed(e));
            }
        };
        let h = frame.header();
        if h.tunnel != self.params.tunnel {
            self.stats.wrong_tunnel += 1;
            return Err(RxError::WrongTunnel {
                got: h.tunnel,
                want: self.params.tunnel,
            });
        }
        if h.schema != self.params.schema {
            self.stats.wrong_schema += 1;
            return Err(RxError::WrongSchema {
                got: h.schema,
                want: self.params.schema,
            });
        }
        match self.window.classify_and_record(h.seq) {
            SeqClass::Duplicate => {
                self.stats.duplicates += 1;
                return Err(RxError::Duplicate { seq: h.seq });
            }
            SeqClass::Stale { highest } => {
                self.stats.stale += 1;
                return Err(RxError::Stale {
                    seq: h.seq,
                    highest,
                });
            }
            SeqClass::Accept {
                gap,
                filled,
                reordered,
            } => {
                self.stats.lost += gap;
                if filled {
                    self.stats.lost = self.stats.lost.saturating_sub(1);
                }
                self.stats.reordered += reordered as u64;
            }
        }
        if let Some(last) = self.last_rx {
            let min_gap = self.params.period_ns.saturating_sub(self.tolerance);
            if rx_time.saturating_sub(last) < min_gap {
                self.stats.too_fast += 1;
            }
        }
        self.last_rx = Some(rx_time);

        let (mut good, mut bad) = (0usize, 0usize);
        for chunk in frame.chunks() {
            match chunk {
                Ok(c) => {
                    good += 1;
                    deliver(Delivery {
                        producer: c.producer,
                        data: c.data,
                        seq: h.seq,
                        rx_time,
                        send_time: h.send_time_ns,
                    });
                }
                Err(_) => bad += 1,
            }
        }
        self.stats.frames += 1;
        self.stats.chunks += good as u64;
        self.stats.bad_chunks += bad as u64;
        let latency =
            (rx_time as i128 - h.send_time_ns as i128).clamp(i64::MIN as i128, i64::MAX as i128);
        Ok(RxFrame {
            seq: h.seq,
            send_time: h.send_time_ns,
            rx_time,
            latency_ns: latency as i64,
            chunks: good,
            bad_chunks: bad,
        })
    }

    /// Counters.
    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlane_wire::{FrameBuilder, HEADER_LEN, MAX_FRAME_LEN};

    fn params() -> TunnelParams {
        TunnelParams {
            tunnel: 3,
            period_ns: 1_000,
            max_packet: MAX_FRAME_LEN,
            schema: Schema::Chunk26,
        }
    }

    fn frame(tunnel: u32, seq: u64, chunks: usize, buf: &mut [u8]) -> usize {
        let mut b = FrameBuilder::new(buf, Schema::Chunk26).unwrap();
        for i in 0..chunks {
            b.push_chunk(i as u8, &[i as u8; 4]).unwrap();
        }
        b.finish(tunnel, seq, 100, 0).unwrap()
    }

    #[test]
    fn sequence_accounting_table() {
        // (arrival order, lost, reordered, duplicates, stale)
        let cases: &[(&[u64], u64, u64, u64, u64)] = &[
            (&[0, 1, 2, 3], 0, 0, 0, 0),
            (&[0, 1, 3, 4], 1, 0, 0, 0),
            (&[0, 2, 1, 3], 0, 1, 0, 0),
            (&[0, 3, 1, 2], 0, 2, 0, 0),
            (&[0, 1, 1, 0, 2], 0, 0, 2, 0),
            (&[5, 3, 6], 1, 1, 0, 0), // 3 below the first: 4 now counted lost
            (&[5, 3, 4, 6], 0, 2, 0, 0),
            (&[0, 200, 1], 199, 0, 0, 1),
            (&[10, 9, 9, 200, 80, 72], 189 - 1, 2, 1, 1), // 72 is 128 behind: stale
            (&[10, 9, 9, 200, 80, 73], 189 - 2, 3, 1, 0), // 73 is 127 behind: in window
        ];
        for (i, (seqs, lost, reordered, dups, stale)) in cases.iter().enumerate() {
            let mut r = PeriodicReceiver::new(params());
            let mut buf = [0u8; MAX_FRAME_LEN];
            for (k, &s) in seqs.iter().enumerate() {
                let n = frame(3, s, 1, &mut buf);
                let _ = r.handle_datagram(k as u64 * 1_000, &buf[..n], &mut |_| {});
            }
            let st = r.stats();
            assert_eq!(
                (st.lost, st.reordered, st.duplicates, st.stale),
                (*lost, *reordered, *dups, *stale),
                "case {i}: {seqs:?}"
            );
        }
    }

    #[test]
    fn refusals_table() {
        let mut buf = [0u8; MAX_FRAME_LEN + 1];
        let mut r = PeriodicReceiver::new(TunnelParams {
            max_packet: 200,
            ..params()
        });
        let n = frame(3, 0, 10, &mut buf); // 32 + 260 > 200
        assert_eq!(
            r.handle_datagram(0, &buf[..n], &mut |_| {}),
            Err(RxError::Oversized { len: n, max: 200 })
        );
        let n = frame(4, 0, 1, &mut buf);
        assert_eq!(
            r.handle_datagram(0, &buf[..n], &mut |_| {}),
            Err(RxError::WrongTunnel { got: 4, want: 3 })
        );
        assert_eq!(
            r.handle_datagram(0, &buf[..10], &mut |_| {}),
            Err(RxError::Malformed(FrameError::Truncated { len: 10 }))
        );
        let mut b = FrameBuilder::new(&mut buf, Schema::Chunk36).unwrap();
        b.push_chunk(0, b"x").unwrap();
        let n = b.finish(3, 0, 0, 0).unwrap();
        assert_eq!(
            r.handle_datagram(0, &buf[..n], &mut |_| {}),
            Err(RxError::WrongSchema {
                got: Schema::Chunk36,
                want: Schema::Chunk26
            })
        );
        let st = r.stats();
        assert_eq!(
            (
                st.oversized,
                st.wrong_tunnel,
                st.malformed,
                st.wrong_schema,
                st.frames
            ),
            (1, 1, 1, 1, 0)
        );
    }

    #[test]
    fn bad_chunk_costs_only_itself_and_latency_is_signed() {
        let mut buf = [0u8; MAX_FRAME_LEN];
        let n = frame(3, 0, 3, &mut buf);
        buf[HEADER_LEN + 26 + 3] ^= 0x40;
        let mut r = PeriodicReceiver::new(params());
        let mut got = Vec::new();
        let f = r
            .handle_datagram(40, &buf[..n], &mut |d| {
                got.push((d.producer, d.seq, d.rx_time))
            })
            .unwrap();
        assert_eq!(got, [(0, 0, 40), (2, 0, 40)]);
        assert_eq!((f.chunks, f.bad_chunks, f.latency_ns), (2, 1, -60));
        assert_eq!((r.stats().chunks, r.stats().bad_chunks), (2, 1));
    }

    #[test]
    fn too_fast_is_counted_but_delivered() {
        let mut buf = [0u8; MAX_FRAME_LEN];
        let mut r = PeriodicReceiver::new(params()); // π = 1000, tolerance 250
        let arrivals = [(0u64, 0u64), (1, 1_000), (2, 1_760), (3, 2_200), (4, 3_500)];
        let mut delivered = 0;
        for (seq, t) in arrivals {
            let n = frame(3, seq, 1, &mut buf);
            r.handle_datagram(t, &buf[..n], &mut |_| delivered += 1)
                .unwrap();
        }
        assert_eq!((r.stats().too_fast, delivered), (1, 5));
    }
}
