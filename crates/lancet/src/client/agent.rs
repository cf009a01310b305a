//! One agent thread: sending every request at its scheduled time and
//! receiving responses in between, until the run stops and the last
//! responses are in.

use super::conn::Conn;
use super::limits::{DIRECT_POLL_CONNS, FLUSH_NS, SEND_BURST};
use super::plan::AgentPlan;
use super::r2p2;
use super::tcp::{tcp_drain_tx, tcp_flush, tcp_queue, tcp_receive};
use super::tracker::{Slot, TimelineBucket, Tracker, EMPTY};
use super::udp::{udp_drain_tx, udp_receive, udp_send};
use crate::dist::Schedule;
use crate::report::Counts;
use crate::rng::Rng;
use crate::sample::StampTrace;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xlane_host::socket::{monotonic_ns, realtime_ns};

pub(super) struct Agent {
    pub(super) plan: AgentPlan,
    /// The servers (or router) requests go to; more than one: picked at
    /// random by `pick`.
    pub(super) targets: Vec<SocketAddrV4>,
    pub(super) pick: Rng,
    /// R2P2 framing: the packet buffer (empty without R2P2).
    pub(super) pkt: Vec<u8>,
    pub(super) conns: Vec<Conn>,
    pub(super) pollfds: Vec<libc::pollfd>,
    pub(super) tracker: Tracker,
    pub(super) req: Vec<u8>,
    pub(super) rbuf: Vec<u8>,
    pub(super) schedule: Schedule,
    pub(super) stop_at: Arc<AtomicU64>,
    pub(super) drain_ns: u64,
    pub(super) spin_ns: u64,
    pub(super) gaps: Vec<f64>,
    pub(super) gap_every: u64,
    pub(super) next_conn: usize,
    pub(super) seq: u64,
    pub(super) rt_priority: Option<i32>,
}

/// What an agent thread hands back.
pub(super) struct AgentResult {
    pub(super) rate: f64,
    pub(super) counts: Counts,
    pub(super) gaps: Vec<f64>,
    pub(super) stopped_at: u64,
    pub(super) trace: Vec<StampTrace>,
    pub(super) timeline: Vec<TimelineBucket>,
}
impl Agent {
    pub(super) fn run(mut self) -> AgentResult {
        xlane_host::runtime::tighten_timer_slack();
        if let Some(p) = self.rt_priority {
            if crate::sched::set_realtime(p).is_err() {
                self.tracker.counts.rt_denied += 1;
            }
        }
        let t0 = self.tracker.t0;
        let mut next = self.schedule.next_ns();
        let mut last_send_mono = 0u64;
        let mut last_flush = monotonic_ns();
        let mut stopped_at;
        loop {
            let stop_at = self.stop_at.load(Ordering::Relaxed);
            let now = monotonic_ns();
            if t0 + next >= stop_at {
                stopped_at = stop_at.min(now.max(t0));
                break;
            }
            let mut burst = 0;
            while t0 + next <= now && t0 + next < stop_at && burst < SEND_BURST {
                let send_mono = self.send_one(next);
                if let Some(m) = send_mono {
                    let n = self.tracker.counts.sent;
                    if last_send_mono != 0
                        && n % self.gap_every == 0
                        && self.gaps.len() < self.gaps.capacity()
                    {
                        // In units of the first rate's gaps (a stepped
                        // schedule changes the mean gap).
                        let g = m.saturating_sub(last_send_mono) as f64;
                        self.gaps.push(g * self.schedule.rate_factor());
                    }
                    last_send_mono = m;
                }
                next = self.schedule.next_ns();
                burst += 1;
            }
            let now = monotonic_ns();
            let due = t0 + next;
            let timeout = if due > now + self.spin_ns {
                due - now - self.spin_ns
            } else {
                0
            };
            self.poll_and_receive(timeout);
            if now.saturating_sub(last_flush) > FLUSH_NS {
                self.tracker.flush();
                last_flush = now;
            }
        }
        // Sending is over: collect what is still coming, for a bounded time.
        stopped_at = stopped_at.max(t0);
        let end = monotonic_ns().saturating_add(self.drain_ns);
        while self.tracker.outstanding > 0 {
            let now = monotonic_ns();
            if now >= end {
                break;
            }
            self.poll_and_receive((end - now).min(1_000_000));
        }
        self.tracker.flush();
        self.tracker.lose_outstanding();
        AgentResult {
            rate: self.plan.rate,
            counts: self.tracker.counts.clone(),
            gaps: self.gaps,
            stopped_at,
            trace: std::mem::take(&mut self.tracker.trace),
            timeline: std::mem::take(&mut self.tracker.timeline),
        }
    }

    /// Send the request scheduled at `sched_ns`; returns the send time.
    pub(super) fn send_one(&mut self, sched_ns: u64) -> Option<u64> {
        let n = self.conns.len();
        let mut ci = None;
        for k in 0..n {
            let i = (self.next_conn + k) % n;
            if !matches!(&self.conns[i], Conn::Tcp(t) if t.broken) {
                ci = Some(i);
                break;
            }
        }
        self.next_conn = (self.next_conn + 1) % n.max(1);
        let Some(ci) = ci else {
            self.tracker.counts.send_errors += 1;
            return None;
        };
        let id = self.seq;
        self.seq += 1;
        let si = Tracker::slot_of(id);
        if self.tracker.inflight[si].id != EMPTY {
            // Unanswered for INFLIGHT requests: give up on it.
            self.tracker.counts.lost += 1;
            self.tracker.outstanding = self.tracker.outstanding.saturating_sub(1);
            self.tracker.inflight[si].id = EMPTY;
            let t = self.tracker.inflight[si].sched_ns;
            if let Some(b) = self.tracker.bucket(t) {
                b.lost += 1;
            }
        }
        self.tracker.app.set_id(&mut self.req, id);
        let send_mono = monotonic_ns();
        let tx_user_rt = realtime_ns();
        // The slot is filled before the send so that a transmit stamp read
        // right after it finds its request.
        self.tracker.inflight[si] = Slot {
            id,
            sched_ns,
            send_mono,
            tx_user_rt,
            ..Slot::default()
        };
        let target = match self.targets.len() {
            1 => self.targets[0],
            n => self.targets[(self.pick.next_u64() % n as u64) as usize],
        };
        let ok = match &mut self.conns[ci] {
            Conn::Udp(u) if !self.pkt.is_empty() => {
                r2p2::send_first(u, &mut self.tracker, &self.req, &mut self.pkt, id, target)
            }
            Conn::Udp(u) => udp_send(u, &mut self.tracker, &self.req, target, id, true),
            Conn::Tcp(t) => tcp_queue(t, &mut self.tracker, &self.req, id),
        };
        if !ok {
            self.tracker.inflight[si].id = EMPTY;
            self.tracker.counts.send_errors += 1;
            return None;
        }
        self.tracker.outstanding += 1;
        self.tracker.counts.sent += 1;
        if let Some(b) = self.tracker.bucket(sched_ns) {
            b.sent += 1;
        }
        let lag = send_mono.saturating_sub(self.tracker.t0 + sched_ns);
        self.tracker.counts.max_lag_ns = self.tracker.counts.max_lag_ns.max(lag);
        Some(send_mono)
    }

    pub(super) fn poll_and_receive(&mut self, timeout_ns: u64) {
        if timeout_ns == 0 && self.conns.len() <= DIRECT_POLL_CONNS {
            // Busy-polling a few sockets: one non-blocking receive each is
            // cheaper than a ppoll and then the receive (one system call
            // per socket per pass, as a `recvfrom` loop).
            for c in &mut self.conns {
                match c {
                    Conn::Udp(u) if !self.pkt.is_empty() => r2p2::receive(
                        u,
                        &mut self.tracker,
                        &mut self.rbuf,
                        &mut self.req,
                        &mut self.pkt,
                    ),
                    Conn::Udp(u) => udp_receive(u, &mut self.tracker, &mut self.rbuf),
                    Conn::Tcp(t) => {
                        if t.out_at < t.out.len() {
                            tcp_flush(t, &mut self.tracker);
                        }
                        tcp_receive(t, &mut self.tracker);
                    }
                }
            }
            return;
        }
        for (p, c) in self.pollfds.iter_mut().zip(&self.conns) {
            p.events = libc::POLLIN;
            p.fd = c.fd();
            if let Conn::Tcp(t) = c {
                if t.broken {
                    p.fd = -1; // ignored by ppoll: a dead connection must not spin us
                } else if t.out_at < t.out.len() {
                    p.events |= libc::POLLOUT;
                }
            }
            p.revents = 0;
        }
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: pollfds is a valid array of the length passed; ts lives.
        let r = unsafe {
            libc::ppoll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if r <= 0 {
            return;
        }
        for ci in 0..self.conns.len() {
            let rev = self.pollfds[ci].revents;
            if rev == 0 {
                continue;
            }
            match &mut self.conns[ci] {
                Conn::Udp(u) => {
                    if self.tracker.measure && rev & libc::POLLERR != 0 {
                        udp_drain_tx(u, &mut self.tracker);
                    }
                    if rev & libc::POLLIN != 0 && !self.pkt.is_empty() {
                        r2p2::receive(
                            u,
                            &mut self.tracker,
                            &mut self.rbuf,
                            &mut self.req,
                            &mut self.pkt,
                        );
                    } else if rev & libc::POLLIN != 0 {
                        udp_receive(u, &mut self.tracker, &mut self.rbuf);
                    }
                }
                Conn::Tcp(t) => {
                    if rev & libc::POLLOUT != 0 {
                        tcp_flush(t, &mut self.tracker);
                    }
                    if rev & libc::POLLERR != 0 {
                        tcp_drain_tx(t, &mut self.tracker);
                    }
                    if rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                        tcp_receive(t, &mut self.tracker);
                    }
                }
            }
        }
    }
}
