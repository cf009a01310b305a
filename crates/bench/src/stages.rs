//! Where a flow's median goes: every frame's one-way latency split at the
//! stamps the run has, and the median of each part.
//!
//! A frame carries four times: the sender's stamp (right before the send
//! system call), the return of that call, the receiving kernel's stamp
//! and the moment the receiving thread held the frame. So the latency to
//! the thread splits into
//!
//! - **to the kernel stamp**: the sender's system call, its qdisc, the
//!   veth pair, the switch namespace's forwarding and its port's qdisc,
//!   up to the receiving host's interface: the kernel stamps a frame as
//!   the interface takes it, before the host's IP stack
//!   (`net.core.netdev_tstamp_prequeue`, 1 by default). Where the sender
//!   asked its kernel for transmit stamps (`bench lane` does), this splits
//!   at the moment the sending host's device took the frame: **sending
//!   host** (the system call's entry, UDP, IP, the host's qdisc) and
//!   **emulated switch** (the veth pair, the switch namespace's forwarding
//!   and multicast copies, its port's qdisc, the veth pair to the
//!   receiving host), which a real switch does in hardware;
//! - **waiting for the own send**: on veth every stage above runs inside
//!   the sender's system call, on the sending CPU. When the receivers are
//!   served by the sender's own thread (the emulated hosts share one lane
//!   core), a frame that reached its socket waits there until the call
//!   has carried the frame's other copies too. On separate hosts the
//!   receiving core does not wait for the sending one: this part is the
//!   emulation's, and is reported apart;
//! - **read**: from then until the thread holds the frame (the receiving
//!   host's IP and UDP stack if it had not run yet, waking or polling,
//!   `epoll_wait`, `recvmmsg`, and the sockets read before this one in the
//!   same turn).
//!
//! The medians of the parts need not add up to the median of the whole.

use crate::flows::FlowResult;
use crate::table::{fmt_ns, Table};
use serde::Serialize;
use xlane_stats::percentile;

/// The medians of one flow's parts (see the module docs), ns.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stages {
    /// The flow's name.
    pub name: String,
    /// Frames received (all receivers).
    pub samples: u64,
    /// λ50 to the receiving thread.
    pub thread_p50_ns: u64,
    /// Sender's stamp → its send call returned.
    pub send_call_p50_ns: u64,
    /// Sender's stamp → kernel receive stamp.
    pub kernel_p50_ns: u64,
    /// Sender's stamp → its device took the frame (`None` without
    /// transmit stamps).
    pub sending_host_p50_ns: Option<u64>,
    /// Its device took the frame → kernel receive stamp: the emulated
    /// switch.
    pub switch_p50_ns: Option<u64>,
    /// Kernel receive stamp → the sender's call returned (0 when it
    /// returned first).
    pub own_send_wait_p50_ns: u64,
    /// The receive path's own time.
    pub read_p50_ns: u64,
    /// λ50 to the receiving thread with the wait for the own send taken
    /// out: what a receiver on a core of its own would see.
    pub thread_apart_p50_ns: u64,
    /// λ50 to the receiving thread per receiver, in the receivers' order
    /// (the order a turn reads their sockets in).
    pub per_receiver_p50_ns: Vec<u64>,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    percentile(&v, 0.5).unwrap_or(0)
}

impl Stages {
    /// The parts of `f`'s frames.
    pub fn of(f: &FlowResult) -> Stages {
        let part = |m: &dyn Fn(&crate::flows::FlowSample) -> u64| {
            median(f.samples.iter().map(m).collect())
        };
        let receivers = f
            .samples
            .iter()
            .map(|s| s.receiver)
            .max()
            .map_or(0, |r| r + 1);
        let per_receiver_p50_ns = (0..receivers)
            .map(|r| {
                median(
                    f.samples
                        .iter()
                        .filter(|s| s.receiver == r)
                        .map(|s| s.latency_ns())
                        .collect(),
                )
            })
            .collect();
        let driver: Vec<_> = f.samples.iter().filter(|s| s.send_driver_ns != 0).collect();
        let of_driver = |m: &dyn Fn(&crate::flows::FlowSample) -> u64| {
            (!driver.is_empty()).then(|| median(driver.iter().map(|s| m(s)).collect()))
        };
        Stages {
            name: f.name.clone(),
            sending_host_p50_ns: of_driver(&|s| s.send_driver_ns.saturating_sub(s.sample.send_ns)),
            switch_p50_ns: of_driver(&|s| s.sample.kernel_rx_ns.saturating_sub(s.send_driver_ns)),
            samples: f.samples.len() as u64,
            thread_p50_ns: part(&|s| s.latency_ns()),
            send_call_p50_ns: part(&|s| s.send_returned_ns.saturating_sub(s.sample.send_ns)),
            kernel_p50_ns: part(&|s| s.network_ns()),
            own_send_wait_p50_ns: part(&|s| s.own_send_wait_ns()),
            read_p50_ns: part(&|s| s.read_ns()),
            thread_apart_p50_ns: part(&|s| s.latency_ns().saturating_sub(s.own_send_wait_ns())),
            per_receiver_p50_ns,
        }
    }

    /// λ50 to the thread (own send apart) / λ50 to the kernel stamp
    /// (`None` without samples).
    pub fn thread_to_kernel(&self) -> Option<f64> {
        (self.kernel_p50_ns > 0)
            .then(|| self.thread_apart_p50_ns as f64 / self.kernel_p50_ns as f64)
    }
}

/// The table a person reads: one row per flow.
pub fn render(stages: &[Stages]) -> String {
    let mut t = Table::new(&[
        "config",
        "λ50 thread",
        "send call",
        "to kernel stamp",
        "of it: sending host",
        "emulated switch",
        "waits for own send",
        "read",
        "λ50 thread, own send apart",
        "÷ kernel",
        "λ50 per receiver",
    ]);
    for s in stages {
        let per: Vec<String> = s.per_receiver_p50_ns.iter().map(|&n| fmt_ns(n)).collect();
        t.row(vec![
            s.name.clone(),
            fmt_ns(s.thread_p50_ns),
            fmt_ns(s.send_call_p50_ns),
            fmt_ns(s.kernel_p50_ns),
            s.sending_host_p50_ns.map_or("-".into(), fmt_ns),
            s.switch_p50_ns.map_or("-".into(), fmt_ns),
            fmt_ns(s.own_send_wait_p50_ns),
            fmt_ns(s.read_p50_ns),
            fmt_ns(s.thread_apart_p50_ns),
            s.thread_to_kernel()
                .map_or("-".into(), |r| format!("{r:.2}×")),
            per.join(" "),
        ]);
    }
    format!(
        "where the median goes (medians of each part; a receiver on the sender's own thread waits for the sender's system call, which on veth carries every copy):\n{}",
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::FlowSample;
    use xlane_host::runtime::Sample;

    fn s(receiver: u16, send: u64, ret: u64, kernel: u64, user: u64) -> FlowSample {
        FlowSample {
            sample: Sample {
                seq: 0,
                send_ns: send,
                kernel_rx_ns: kernel,
                user_rx_ns: user,
            },
            slot_ns: send,
            receiver,
            send_returned_ns: ret,
            send_driver_ns: 0,
        }
    }

    /// The network part splits at the transmit stamp where frames have one.
    #[test]
    fn the_network_part_splits_at_the_transmit_stamp() {
        let mut with = s(0, 100, 3_000, 1_100, 4_000);
        with.send_driver_ns = 400;
        let f = FlowResult {
            name: "xlane".into(),
            samples: vec![with, s(0, 100, 3_000, 1_100, 4_000)],
            ..FlowResult::default()
        };
        let st = Stages::of(&f);
        assert_eq!(st.sending_host_p50_ns, Some(300));
        assert_eq!(st.switch_p50_ns, Some(700));
        assert_eq!(st.kernel_p50_ns, 1_000);
        let none = Stages::of(&FlowResult {
            samples: vec![s(0, 100, 3_000, 1_100, 4_000)],
            ..FlowResult::default()
        });
        assert_eq!(none.sending_host_p50_ns, None);
    }

    /// Each case: one frame's (send, returned, kernel, user) stamps and
    /// the parts it splits into (wait for the own send, read), which add
    /// up to the time from the kernel stamp to the thread.
    #[test]
    fn a_frame_splits_at_its_stamps() {
        // (returned, kernel, user, want wait, want read)
        let cases = [
            // Delivered inside the send call, read after it returned.
            (3_000, 1_000, 4_000, 2_000, 1_000),
            // The call returned before the kernel stamp: no wait.
            (500, 1_000, 4_000, 0, 3_000),
            // Unknown return (0): no wait.
            (0, 1_000, 4_000, 0, 3_000),
            // Another thread read it before the call returned.
            (9_000, 1_000, 4_000, 3_000, 0),
        ];
        for (ret, kernel, user, wait, read) in cases {
            let x = s(0, 100, ret, kernel, user);
            assert_eq!((x.own_send_wait_ns(), x.read_ns()), (wait, read), "{ret}");
            assert_eq!(wait + read, user - kernel);
        }
    }

    #[test]
    fn medians_per_part_and_per_receiver() {
        let f = FlowResult {
            name: "xlane".into(),
            samples: vec![
                s(0, 0, 3_000, 1_000, 4_000),
                s(1, 0, 3_000, 2_000, 5_000),
                s(0, 0, 3_000, 1_000, 4_000),
                s(1, 0, 3_000, 2_000, 6_000),
                s(1, 0, 3_000, 2_000, 6_000),
            ],
            ..FlowResult::default()
        };
        let st = Stages::of(&f);
        assert_eq!(st.samples, 5);
        assert_eq!(st.thread_p50_ns, 5_000);
        assert_eq!(st.send_call_p50_ns, 3_000);
        assert_eq!(st.kernel_p50_ns, 2_000);
        assert_eq!(st.own_send_wait_p50_ns, 1_000);
        assert_eq!(st.thread_apart_p50_ns, 4_000);
        assert_eq!(st.per_receiver_p50_ns, vec![4_000, 6_000]);
        assert_eq!(st.thread_to_kernel(), Some(2.0));
        let text = render(&[st, Stages::of(&FlowResult::default())]);
        assert!(
            text.contains("2.00×") && text.lines().any(|l| l.ends_with('-') || l.contains(" - ")),
            "{text}"
        );
    }
}
