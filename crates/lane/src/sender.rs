//! The periodic unicast sender.

use crate::queue::ChunkQueue;
use crate::slots::{Claim, SlotClock};
use crate::{Nanos, ParamsError, TunnelParams};
use xlane_wire::{flags, EmitError, FrameBuilder};

/// One frame built into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Frame length: send `buf[..len]`.
    pub len: usize,
    /// Sequence number of the frame (0, 1, 2, … per tunnel).
    pub seq: u64,
    /// Start of the slot the frame belongs to (`≤ now < slot + π`).
    pub slot: Nanos,
    /// Chunks in the frame (0 for a heartbeat).
    pub chunks: usize,
}

/// Why a chunk was not queued. Nothing is dropped silently: the caller keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnqueueError {
    /// The pending-chunk queue is full.
    #[error("queue full ({capacity} chunks)")]
    QueueFull {
        /// Queue capacity.
        capacity: usize,
    },
    /// The data can never be sent on this tunnel: longer than one chunk, or σ
    /// leaves no room for a chunk at all (then `max` is 0).
    #[error("{len} bytes cannot be sent on this tunnel (max {max} per chunk)")]
    TooLarge {
        /// Bytes offered.
        len: usize,
        /// Most bytes one chunk of this tunnel carries.
        max: usize,
    },
}

/// Why no frame was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransmitError {
    /// The current slot window already carried a frame (or the first slot has not
    /// begun): nothing was sent. `next_slot` is the earliest time a frame may go out.
    #[error("too early: next slot at {next_slot} ns")]
    TooEarly {
        /// Earliest send time.
        next_slot: Nanos,
    },
    /// The buffer is smaller than σ.
    #[error("buffer of {have} B, tunnel frames need up to {need} B")]
    BufferTooSmall {
        /// σ.
        need: usize,
        /// Buffer length.
        have: usize,
    },
    /// The frame codec refused (not expected: parameters are checked at setup).
    #[error("frame codec: {0}")]
    Emit(#[from] EmitError),
}

/// Counters of a sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Frames built.
    pub frames: u64,
    /// Chunks sent in those frames.
    pub chunks: u64,
    /// Frames sent with no chunk (heartbeat mode or explicit empty sends).
    pub heartbeats: u64,
    /// Chunks accepted by `enqueue`.
    pub enqueued: u64,
    /// `enqueue` refusals because the queue was full.
    pub queue_full: u64,
    /// `enqueue` refusals because the data can never fit.
    pub too_large: u64,
    /// Due polls that found nothing to send (slot left empty).
    pub idle_slots: u64,
    /// Slot windows skipped because the periodic poll came after they ended.
    pub late_slots: u64,
    /// Frames sent by `poll_transmit` in a later window than the one due.
    pub late_frames: u64,
    /// Largest `now − slot` of a frame (how late inside its window).
    pub max_lateness_ns: u64,
    /// `transmit_now` refusals ([`TransmitError::TooEarly`]).
    pub too_early: u64,
}

/// Periodic unicast sender for one tunnel (period π, size σ).
///
/// Producers [`enqueue`](Self::enqueue) chunks at any time; the lane loop calls
/// [`poll_transmit`](Self::poll_transmit) at [`poll_timeout`](Self::poll_timeout).
/// Each frame packs pending chunks round-robin across producers (one chunk per
/// producer per turn, FIFO per producer; the turn order carries over between
/// frames), up to σ. Slot rules: see [`SlotClock`].
pub struct PeriodicSender {
    params: TunnelParams,
    clock: SlotClock,
    queue: ChunkQueue,
    seq: u64,
    heartbeat: bool,
    stats: SenderStats,
}

impl PeriodicSender {
    /// Queue capacity used by [`PeriodicSender::new`].
    pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;

    /// A sender whose slot 0 starts at `first_slot`, with a queue of
    /// [`Self::DEFAULT_QUEUE_CAPACITY`] chunks. Allocates (only here).
    pub fn new(params: TunnelParams, first_slot: Nanos) -> Result<Self, ParamsError> {
        Self::with_capacity(params, first_slot, Self::DEFAULT_QUEUE_CAPACITY)
    }

    /// As [`Self::new`] with a queue of `capacity` chunks (1..=65535).
    pub fn with_capacity(
        params: TunnelParams,
        first_slot: Nanos,
        capacity: usize,
    ) -> Result<Self, ParamsError> {
        params.validate()?;
        if capacity == 0 || capacity >= u16::MAX as usize {
            return Err(ParamsError::QueueCapacity(capacity));
        }
        Ok(PeriodicSender {
            params,
            clock: SlotClock::new(first_slot, params.period_ns)?,
            queue: ChunkQueue::new(capacity),
            seq: 0,
            heartbeat: false,
            stats: SenderStats::default(),
        })
    }

    /// The tunnel parameters.
    pub fn params(&self) -> TunnelParams {
        self.params
    }

    /// Takes a new period and σ (e.g. the controller granted new ones): the
    /// slot grid starts again at `first_slot`, the first window a frame may
    /// use under the new rate; chunks queued stay queued, the sequence goes
    /// on. Chunks that no longer fit a frame of the new σ stay queued until
    /// the next retune (none do while σ holds a chunk). No allocation.
    pub fn retune(
        &mut self,
        period_ns: Nanos,
        max_packet: usize,
        first_slot: Nanos,
    ) -> Result<(), ParamsError> {
        let params = TunnelParams {
            period_ns,
            max_packet,
            ..self.params
        };
        params.validate()?;
        self.clock = SlotClock::new(first_slot, period_ns)?;
        self.params = params;
        Ok(())
    }

    /// In heartbeat mode a due poll with nothing pending sends an empty frame
    /// (flag [`flags::HEARTBEAT`]) instead of leaving the slot empty.
    pub fn set_heartbeat(&mut self, on: bool) {
        self.heartbeat = on;
    }

    /// Queues one chunk of `producer`. No allocation; O(1).
    ///
    /// Errors (the data is not queued, the caller still has it):
    /// [`EnqueueError::TooLarge`] if `data` is longer than a chunk carries or σ has
    /// no room for a chunk; [`EnqueueError::QueueFull`] if the queue is full.
    pub fn enqueue(&mut self, producer: u8, data: &[u8]) -> Result<(), EnqueueError> {
        let max = if self.params.chunks_per_frame() == 0 {
            0
        } else {
            self.params.schema.data_capacity()
        };
        if data.len() > max || max == 0 {
            self.stats.too_large += 1;
            return Err(EnqueueError::TooLarge {
                len: data.len(),
                max,
            });
        }
        if !self.queue.push(producer, data) {
            self.stats.queue_full += 1;
            return Err(EnqueueError::QueueFull {
                capacity: self.queue.capacity(),
            });
        }
        self.stats.enqueued += 1;
        Ok(())
    }

    /// Chunks waiting.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Chunks waiting from one producer.
    pub fn pending_for(&self, producer: u8) -> usize {
        self.queue.len_of(producer)
    }

    /// When the next slot is due (the lane loop sleeps until then).
    pub fn poll_timeout(&self) -> Nanos {
        self.clock.next_due()
    }

    /// The slot grid.
    pub fn clock(&self) -> &SlotClock {
        &self.clock
    }

    /// Builds the frame of the due slot into `buf` (≥ σ bytes).
    ///
    /// `Ok(None)` if the slot is not due yet, or if nothing is pending and heartbeat
    /// mode is off (the slot is left empty). A late poll sends now, in the window
    /// containing `now`; windows missed in between are skipped and counted
    /// ([`SenderStats::late_slots`]), never made up for. At most one frame per
    /// window. The header's send time is `now` (re-stamp right before the syscall
    /// with `xlane_wire::stamp_send_time`).
    ///
    /// No allocation; bounded work: at most one frame of ≤ 55 chunks.
    pub fn poll_transmit(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, TransmitError> {
        if !self.clock.is_due(now) {
            return Ok(None);
        }
        if self.queue.is_empty() && !self.heartbeat {
            self.stats.idle_slots += 1;
            self.stats.late_slots += self.clock.pass(now);
            return Ok(None);
        }
        self.check_buf(buf)?;
        let claim = match self.clock.claim(now) {
            Ok(c) => c,
            // Due but the window is taken: transmit_now used it. Wait for the next.
            Err(_) => {
                self.stats.late_slots += self.clock.pass(now);
                return Ok(None);
            }
        };
        if claim.missed > 0 {
            self.stats.late_slots += claim.missed;
            self.stats.late_frames += 1;
        }
        self.build(now, claim, buf).map(Some)
    }

    /// Sends now, with whatever is pending (possibly nothing: an empty frame), if the
    /// window containing `now` has not carried a frame yet. Otherwise
    /// [`TransmitError::TooEarly`] with the next free slot: nothing is sent.
    ///
    /// No allocation; bounded work: at most one frame of ≤ 55 chunks.
    pub fn transmit_now(&mut self, now: Nanos, buf: &mut [u8]) -> Result<Transmit, TransmitError> {
        self.check_buf(buf)?;
        match self.clock.claim(now) {
            Ok(claim) => self.build(now, claim, buf),
            Err(next_slot) => {
                self.stats.too_early += 1;
                Err(TransmitError::TooEarly { next_slot })
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    fn check_buf(&self, buf: &[u8]) -> Result<(), TransmitError> {
        if buf.len() < self.params.max_packet {
            return Err(TransmitError::BufferTooSmall {
                need: self.params.max_packet,
                have: buf.len(),
            });
        }
        Ok(())
    }

    fn build(
        &mut self,
        now: Nanos,
        claim: Claim,
        buf: &mut [u8],
    ) -> Result<Transmit, TransmitError> {
        let sigma = self.params.max_packet;
        let mut b = FrameBuilder::new(&mut buf[..sigma], self.params.schema)?;
        while b.remaining() > 0 {
            let Some((producer, data)) = self.queue.peek() else {
                break;
            };
            b.push_chunk(producer, data)?;
            self.queue.pop();
        }
        let chunks = b.chunks();
        let fl = if chunks == 0 { flags::HEARTBEAT } else { 0 };
        let len = b.finish(self.params.tunnel, self.seq, now, fl)?;
        let tx = Transmit {
            len,
            seq: self.seq,
            slot: claim.slot,
            chunks,
        };
        self.seq += 1;
        self.stats.frames += 1;
        self.stats.chunks += chunks as u64;
        self.stats.heartbeats += (chunks == 0) as u64;
        self.stats.max_lateness_ns = self.stats.max_lateness_ns.max(now - claim.slot);
        Ok(tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlane_wire::{Frame, Schema, MAX_FRAME_LEN};

    const PI: u64 = 1_000;

    fn params(sigma: usize) -> TunnelParams {
        TunnelParams {
            tunnel: 7,
            period_ns: PI,
            max_packet: sigma,
            schema: Schema::Chunk26,
        }
    }

    #[test]
    fn transmit_now_too_early_in_the_same_window() {
        let mut s = PeriodicSender::new(params(MAX_FRAME_LEN), 10_000).unwrap();
        let mut buf = [0u8; MAX_FRAME_LEN];
        assert_eq!(
            s.transmit_now(9_999, &mut buf),
            Err(TransmitError::TooEarly { next_slot: 10_000 })
        );
        let tx = s.transmit_now(10_500, &mut buf).unwrap();
        assert_eq!((tx.seq, tx.slot, tx.chunks), (0, 10_000, 0));
        assert_eq!(
            s.transmit_now(10_999, &mut buf),
            Err(TransmitError::TooEarly { next_slot: 11_000 })
        );
        assert_eq!(s.transmit_now(11_000, &mut buf).map(|t| t.slot), Ok(11_000));
        assert_eq!(s.stats().too_early, 2);
        // The periodic poll does not send again in a window transmit_now used.
        s.enqueue(1, b"x").unwrap();
        assert_eq!(s.poll_transmit(11_500, &mut buf), Ok(None));
        assert_eq!(s.poll_timeout(), 12_000);
    }

    #[test]
    fn retune_keeps_the_queue_and_sequence_and_moves_the_grid() {
        let mut s = PeriodicSender::new(params(MAX_FRAME_LEN), 0).unwrap();
        let mut buf = [0u8; MAX_FRAME_LEN];
        s.enqueue(1, b"a").unwrap();
        assert_eq!(
            s.poll_transmit(0, &mut buf).unwrap().map(|t| t.seq),
            Some(0)
        );
        s.enqueue(1, b"b").unwrap();
        s.enqueue(1, b"c").unwrap();
        // σ of one chunk: one chunk per frame from now on, every 5 µs.
        let one = Schema::Chunk26.frame_len(1);
        s.retune(5_000, one, 10_000).unwrap();
        assert_eq!((s.params().period_ns, s.params().max_packet), (5_000, one));
        assert_eq!(s.poll_timeout(), 10_000);
        assert_eq!(s.poll_transmit(9_999, &mut buf), Ok(None));
        let t = s.poll_transmit(10_000, &mut buf).unwrap().unwrap();
        assert_eq!((t.seq, t.chunks, t.len), (1, 1, one));
        assert_eq!(s.poll_timeout(), 15_000);
        assert_eq!(s.pending(), 1);
        // Refused settings change nothing.
        assert_eq!(s.retune(0, one, 0), Err(ParamsError::ZeroPeriod));
        assert!(s.retune(1_000, MAX_FRAME_LEN + 1, 0).is_err());
        assert_eq!(s.params().period_ns, 5_000);
        assert_eq!(s.poll_timeout(), 15_000);
    }

    #[test]
    fn queue_full_is_a_typed_error() {
        let mut s = PeriodicSender::with_capacity(params(MAX_FRAME_LEN), 0, 2).unwrap();
        s.enqueue(1, b"a").unwrap();
        s.enqueue(2, b"b").unwrap();
        assert_eq!(
            s.enqueue(1, b"c"),
            Err(EnqueueError::QueueFull { capacity: 2 })
        );
        assert_eq!(
            (s.pending(), s.stats().queue_full, s.stats().enqueued),
            (2, 1, 2)
        );
        assert_eq!(
            PeriodicSender::with_capacity(params(MAX_FRAME_LEN), 0, 0).err(),
            Some(ParamsError::QueueCapacity(0))
        );
    }

    #[test]
    fn too_large_is_a_typed_error() {
        let mut s = PeriodicSender::new(params(MAX_FRAME_LEN), 0).unwrap();
        assert_eq!(
            s.enqueue(1, &[0; 21]),
            Err(EnqueueError::TooLarge { len: 21, max: 20 })
        );
        s.enqueue(1, &[0; 20]).unwrap();
        // σ = 57 < 32 + 26: no chunk ever fits; heartbeats still can be sent.
        let mut tiny = PeriodicSender::new(params(57), 0).unwrap();
        assert_eq!(
            tiny.enqueue(1, b"a"),
            Err(EnqueueError::TooLarge { len: 1, max: 0 })
        );
        assert_eq!(tiny.stats().too_large, 1);
        let mut buf = [0u8; 64];
        assert_eq!(tiny.transmit_now(0, &mut buf).map(|t| t.len), Ok(32));
    }

    #[test]
    fn bad_params_are_refused() {
        let cases = [
            (
                TunnelParams {
                    period_ns: 0,
                    ..params(100)
                },
                ParamsError::ZeroPeriod,
            ),
            (
                params(31),
                ParamsError::PacketTooSmall {
                    max_packet: 31,
                    min: 32,
                },
            ),
            (
                params(1473),
                ParamsError::PacketTooLarge {
                    max_packet: 1473,
                    max: 1472,
                },
            ),
        ];
        for (p, want) in cases {
            assert_eq!(PeriodicSender::new(p, 0).err(), Some(want), "{p:?}");
        }
    }

    #[test]
    fn late_polls_skip_slots_without_a_burst() {
        let mut s = PeriodicSender::new(params(MAX_FRAME_LEN), 0).unwrap();
        let mut buf = [0u8; MAX_FRAME_LEN];
        for i in 0..10u8 {
            s.enqueue(i, &[i]).unwrap();
        }
        assert_eq!(s.poll_timeout(), 0);
        let tx = s.poll_transmit(3_500, &mut buf).unwrap().unwrap();
        assert_eq!((tx.slot, tx.seq), (3_000, 0));
        let st = s.stats();
        assert_eq!(
            (st.late_slots, st.late_frames, st.max_lateness_ns),
            (3, 1, 500)
        );
        // No catch-up: the next frame waits for the next window.
        s.enqueue(0, b"more").unwrap();
        assert_eq!(s.poll_transmit(3_501, &mut buf), Ok(None));
        assert_eq!(s.poll_timeout(), 4_000);
        let tx = s.poll_transmit(4_000, &mut buf).unwrap().unwrap();
        assert_eq!((tx.slot, tx.seq, tx.chunks), (4_000, 1, 1));
        assert_eq!(s.stats().late_slots, 3);
    }

    #[test]
    fn idle_slots_and_heartbeats() {
        let mut s = PeriodicSender::new(params(MAX_FRAME_LEN), 0).unwrap();
        let mut buf = [0u8; MAX_FRAME_LEN];
        assert_eq!(s.poll_transmit(0, &mut buf), Ok(None));
        assert_eq!((s.stats().idle_slots, s.poll_timeout()), (1, PI));
        s.set_heartbeat(true);
        let tx = s.poll_transmit(PI, &mut buf).unwrap().unwrap();
        assert_eq!((tx.chunks, tx.len), (0, 32));
        let f = Frame::new_checked(&buf[..tx.len]).unwrap();
        assert_eq!(f.header().flags, flags::HEARTBEAT);
        assert_eq!(s.stats().heartbeats, 1);
    }

    #[test]
    fn frames_respect_sigma_and_pack_round_robin() {
        // σ = 32 + 3 chunks.
        let sigma = Schema::Chunk26.frame_len(3);
        let mut s = PeriodicSender::new(params(sigma), 0).unwrap();
        let mut buf = [0u8; MAX_FRAME_LEN];
        for k in 0..4u8 {
            s.enqueue(1, &[1, k]).unwrap();
        }
        s.enqueue(2, &[2, 0]).unwrap();
        s.enqueue(3, &[3, 0]).unwrap();
        let mut seen = Vec::new();
        let mut now = 0;
        while s.pending() > 0 {
            let tx = s.poll_transmit(now, &mut buf).unwrap().unwrap();
            assert!(tx.len <= sigma);
            let f = Frame::new_checked(&buf[..tx.len]).unwrap();
            seen.push(
                f.chunks()
                    .map(|c| c.unwrap().data.to_vec())
                    .collect::<Vec<_>>(),
            );
            now += PI;
        }
        let want: Vec<Vec<Vec<u8>>> = vec![
            vec![vec![1, 0], vec![2, 0], vec![3, 0]],
            vec![vec![1, 1], vec![1, 2], vec![1, 3]],
        ];
        assert_eq!(seen, want);
    }

    #[test]
    fn small_buffer_is_refused() {
        let mut s = PeriodicSender::new(params(200), 0).unwrap();
        s.enqueue(0, b"a").unwrap();
        let mut buf = [0u8; 100];
        assert_eq!(
            s.poll_transmit(0, &mut buf),
            Err(TransmitError::BufferTooSmall {
                need: 200,
                have: 100
            })
        );
        assert_eq!(s.pending(), 1);
    }
}
