//! Completion bookkeeping of one agent: the in-flight table, the counters,
//! the samples and the stamp trace, and the timeline of what became of the
//! requests.

use super::limits::{INFLIGHT, RECV_BUDGET};
use crate::proto::App;
use crate::report::Counts;
use crate::sample::{stamp, Sample, StampTrace};
use crate::tstamp::TxMatch;
use serde::Serialize;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use xlane_host::socket::TxStamp;

/// What became of the requests scheduled in one stretch of a run
/// ([`ClientConfig::timeline_ns`](crate::config::ClientConfig::timeline_ns)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TimelineBucket {
    /// Requests sent.
    pub sent: u64,
    /// Requests answered with a response.
    pub answered: u64,
    /// Requests refused with an R2P2 DROP.
    pub dropped: u64,
    /// Requests never answered (still outstanding when the run ended, or
    /// forgotten after [`INFLIGHT`] later ones).
    pub lost: u64,
}

impl TimelineBucket {
    pub(super) fn add(&mut self, o: &TimelineBucket) {
        self.sent += o.sent;
        self.answered += o.answered;
        self.dropped += o.dropped;
        self.lost += o.lost;
    }
}

#[derive(Clone, Copy)]
pub(super) struct Slot {
    pub(super) id: u64,
    pub(super) sched_ns: u64,
    pub(super) send_mono: u64,
    pub(super) tx_user_rt: u64,
    pub(super) tx_sw: u64,
    pub(super) tx_hw: u64,
    /// R2P2: the rest of the request (REQ1…) waits for the server's REQRDY.
    pub(super) rest_due: bool,
    /// R2P2: the reply packets seen.
    pub(super) reply: crate::r2p2::ReplyProgress,
}

pub(super) const EMPTY: u64 = u64::MAX;

impl Default for Slot {
    fn default() -> Self {
        Slot {
            id: EMPTY,
            sched_ns: 0,
            send_mono: 0,
            tx_user_rt: 0,
            tx_sw: 0,
            tx_hw: 0,
            rest_due: false,
            reply: Default::default(),
        }
    }
}

/// Completion bookkeeping of one agent (split from the sockets so that both
/// can be borrowed at once).
pub(super) struct Tracker {
    pub(super) measure: bool,
    pub(super) t0: u64,
    pub(super) app: App,
    pub(super) size: usize,
    pub(super) inflight: Vec<Slot>,
    pub(super) outstanding: u64,
    pub(super) counts: Counts,
    pub(super) batch: Vec<Sample>,
    pub(super) shared: Arc<Mutex<Vec<Sample>>>,
    pub(super) shared_cap: usize,
    /// Raw stamps of the first `trace_cap` answered requests.
    pub(super) trace: Vec<StampTrace>,
    pub(super) trace_cap: usize,
    /// [`ClientConfig::timeline_ns`](crate::config::ClientConfig::timeline_ns) and the buckets (allocated up front).
    pub(super) timeline_ns: u64,
    pub(super) timeline: Vec<TimelineBucket>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
impl Tracker {
    pub(super) fn slot_of(id: u64) -> usize {
        (id as usize) & (INFLIGHT - 1)
    }

    /// Give a transmit stamp to its request. The first stamp of each kind a
    /// request gets is kept (a TCP request can get more: the rest of a send
    /// call cut short, a retransmission).
    pub(super) fn apply_tx_stamp(&mut self, tx: &mut TxMatch, ts: TxStamp) {
        let Some(id) = tx.request_of(ts.id) else {
            return; // too old (forgotten), not a first segment, or distrusted
        };
        let slot = &mut self.inflight[Self::slot_of(id)];
        if slot.id != id {
            return; // already answered (stamp read late) or dropped
        }
        if let Some(sw) = ts.software_ns {
            if sw < slot.tx_user_rt {
                // A stamp earlier than its own send call: the numbering is off.
                tx.distrust();
                self.counts.tx_stamp_mismatch += 1;
                return;
            }
            if slot.tx_sw == 0 {
                slot.tx_sw = sw;
            }
        }
        if let Some(hw) = ts.hardware_ns {
            if slot.tx_hw == 0 {
                slot.tx_hw = hw;
            }
        }
    }

    /// Read the queued transmit stamps of a socket (`read` fetches one).
    pub(super) fn drain_tx_stamps(
        &mut self,
        tx: &mut TxMatch,
        mut read: impl FnMut() -> io::Result<Option<TxStamp>>,
    ) {
        for _ in 0..4 * RECV_BUDGET {
            match read() {
                Ok(Some(ts)) => self.apply_tx_stamp(tx, ts),
                Ok(None) => return,
                Err(_) => {
                    self.counts.recv_errors += 1;
                    return;
                }
            }
        }
    }

    /// A response to `id` is in but its request has no transmit stamp yet:
    /// the stamp may still sit in the error queue, to be read first.
    pub(super) fn needs_tx_stamp(&self, id: u64) -> bool {
        let slot = &self.inflight[Self::slot_of(id)];
        self.measure && slot.id == id && slot.tx_sw == 0 && slot.tx_hw == 0
    }

    /// The timeline bucket of a request scheduled at `sched_ns`, if any.
    pub(super) fn bucket(&mut self, sched_ns: u64) -> Option<&mut TimelineBucket> {
        if self.timeline_ns == 0 {
            return None;
        }
        self.timeline
            .get_mut((sched_ns / self.timeline_ns) as usize)
    }

    /// Request `id` was refused with an R2P2 DROP: answered, counted in
    /// `dropped`, never a sample.
    pub(super) fn refused(&mut self, id: u64) {
        if let Some(s) = self.take(id) {
            self.counts.dropped += 1;
            if let Some(b) = self.bucket(s.sched_ns) {
                b.dropped += 1;
            }
        }
    }

    /// Every request still outstanding is lost (the run is over).
    pub(super) fn lose_outstanding(&mut self) {
        self.counts.lost += self.outstanding;
        self.outstanding = 0;
        if self.timeline_ns == 0 {
            return;
        }
        for i in 0..self.inflight.len() {
            if self.inflight[i].id != EMPTY {
                let t = self.inflight[i].sched_ns;
                self.inflight[i].id = EMPTY;
                if let Some(b) = self.bucket(t) {
                    b.lost += 1;
                }
            }
        }
    }

    /// Request `id` is answered: its slot, freed (`None`, counted
    /// unmatched, if it holds another request or none).
    pub(super) fn take(&mut self, id: u64) -> Option<Slot> {
        let si = Self::slot_of(id);
        let s = self.inflight[si];
        if s.id != id {
            self.counts.unmatched += 1;
            return None;
        }
        self.inflight[si].id = EMPTY;
        self.outstanding = self.outstanding.saturating_sub(1);
        Some(s)
    }

    /// A response to `id` arrived (counted unmatched if it matches nothing).
    pub(super) fn complete(
        &mut self,
        id: u64,
        rx_sw: Option<u64>,
        rx_hw: Option<u64>,
        user_rx_rt: u64,
        server_ns: Option<u64>,
    ) {
        let Some(s) = self.take(id) else {
            return;
        };
        self.counts.received += 1;
        if let Some(b) = self.bucket(s.sched_ns) {
            b.answered += 1;
        }
        if !self.measure {
            return;
        }
        // A request is sent once due (`t0 + sched <= now` before the send),
        // so this does not saturate; it is the same monotonic clock.
        let lag = s.send_mono.saturating_sub(self.t0 + s.sched_ns);
        let mut stamps = 0u8;
        // Receive and transmit times are realtime stamps taken at different
        // moments (the NIC's, the kernel's or ours): a clock step between
        // them puts the receive first, and then there is no latency to tell.
        let wire = match (rx_hw, s.tx_hw) {
            (Some(rh), th) if th != 0 => {
                stamps |= stamp::TX_HARDWARE | stamp::RX_HARDWARE;
                rh.checked_sub(th)
            }
            _ => {
                let tx = if s.tx_sw != 0 {
                    stamps |= stamp::TX_KERNEL;
                    s.tx_sw
                } else {
                    s.tx_user_rt
                };
                let rx = match rx_sw {
                    Some(v) => {
                        stamps |= stamp::RX_KERNEL;
                        v
                    }
                    None => user_rx_rt,
                };
                rx.checked_sub(tx)
            }
        };
        let user_rtt = user_rx_rt.checked_sub(s.tx_user_rt);
        let (Some(wire), Some(user_rtt)) = (wire, user_rtt) else {
            self.counts.rx_before_tx += 1;
            return;
        };
        let c = &mut self.counts;
        // `apply_tx_stamp` refuses a software stamp before its send call, so
        // tx_sw >= tx_user_rt here.
        if s.tx_sw != 0 {
            c.tx_delay_max_ns = c.tx_delay_max_ns.max(s.tx_sw.saturating_sub(s.tx_user_rt));
        }
        if stamps & stamp::TX_HARDWARE != 0 {
            c.tx_hardware += 1;
        } else if stamps & stamp::TX_KERNEL != 0 {
            c.tx_kernel += 1;
        } else {
            c.tx_user += 1;
        }
        if stamps & stamp::RX_HARDWARE != 0 {
            c.rx_hardware += 1;
        } else if stamps & stamp::RX_KERNEL != 0 {
            c.rx_kernel += 1;
        } else {
            c.rx_user += 1;
        }
        let sat = |v: u64| v.min(u32::MAX as u64) as u32;
        let sample = Sample {
            sched_ns: s.sched_ns,
            latency_ns: lag + wire,
            lag_ns: sat(lag),
            user_rtt_ns: sat(user_rtt),
            server_ns: server_ns.map_or(u32::MAX, |v| sat(v).min(u32::MAX - 1)),
            stamps,
        };
        if self.batch.len() == self.batch.capacity() {
            self.flush();
        }
        self.batch.push(sample);
        if self.trace.len() < self.trace_cap {
            let nz = |v: u64| (v != 0).then_some(v);
            self.trace.push(StampTrace {
                id,
                sched_ns: s.sched_ns,
                tx_user_ns: s.tx_user_rt,
                tx_kernel_ns: nz(s.tx_sw),
                tx_hardware_ns: nz(s.tx_hw),
                rx_kernel_ns: rx_sw,
                rx_hardware_ns: rx_hw,
                rx_user_ns: user_rx_rt,
            });
        }
    }

    pub(super) fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let mut shared = lock(&self.shared);
        let room = self.shared_cap.saturating_sub(shared.len());
        let n = room.min(self.batch.len());
        shared.extend_from_slice(&self.batch[..n]);
        drop(shared);
        self.counts.samples_dropped += (self.batch.len() - n) as u64; // n <= len
        self.batch.clear();
    }
}
