//! The lane core's budget in every lane report: what the lane loop itself
//! took from the core, what the machine took (the floor probe), what is
//! left, and where the core's time went by kind (`/proc/stat`).
//!
//! Headroom = 1 − machine − lane for a loop that sleeps when idle. A
//! polling loop (busy-poll) takes the whole core by design, so its
//! headroom is the share of its turns that found nothing to do. Below
//! [`SATURATION_HEADROOM`] the lane core is saturated: the report says so
//! in one line, the JSON carries `"saturated": true`, and packets lost in
//! such a run are attributed to it. Where the machine has an instruction
//! counter, the report also gives the loops' instructions per packet.

use crate::flows::FlowRun;
use serde::Serialize;
use xlane_host::budget::{CpuShares, CpuTimes, ThreadUsage};

/// Headroom below which the lane core counts as saturated.
pub const SATURATION_HEADROOM: f64 = 0.10;

/// What the lane loops on the lane core did over one or several runs
/// (additive, so interleaved rounds sum up).
#[derive(Clone, Copy, Debug, Default)]
pub struct LaneCoreUse {
    /// Lane loops on the lane core (the most in any one run).
    pub threads: usize,
    /// Wall time of the runs, ns.
    pub wall_ns: u64,
    /// The loops' CPU time and switches.
    pub thread: ThreadUsage,
    /// Frames sent plus datagrams read by those loops.
    pub packets: u64,
    /// Datagrams the kernel dropped at their receiving sockets.
    pub socket_drops: u64,
    /// The lane core's time by kind over the runs.
    pub cpu: CpuTimes,
    /// Whether the loops polled (busy-poll) instead of sleeping.
    pub polling: bool,
    /// Their turns, and the polling turns that found nothing to do.
    pub turns: u64,
    /// See `turns`.
    pub idle_turns: u64,
    /// Instructions they retired (`None` where any went uncounted).
    pub instructions: Option<u64>,
}

impl LaneCoreUse {
    /// The lane core's part of one [`FlowRun`]: the loops pinned to
    /// `lane_core` and the drops at their flows' sockets.
    pub fn of_run(run: &FlowRun, lane_core: usize) -> LaneCoreUse {
        let on_core: Vec<_> = run
            .loops
            .iter()
            .filter(|l| l.core == Some(lane_core))
            .collect();
        let thread = on_core
            .iter()
            .fold(ThreadUsage::default(), |a, l| a.add(&l.stats.thread));
        let packets = on_core
            .iter()
            .map(|l| l.stats.frames + l.stats.datagrams)
            .sum();
        let socket_drops = on_core
            .iter()
            .flat_map(|l| l.flows.iter())
            .filter_map(|&i| run.flows.get(i))
            .map(|f| f.socket_drops)
            .sum();
        LaneCoreUse {
            threads: on_core.len(),
            wall_ns: run.wall_ns,
            thread,
            packets,
            socket_drops,
            cpu: run.lane_cpu.unwrap_or_default(),
            polling: on_core.iter().any(|l| l.polling),
            turns: on_core.iter().map(|l| l.stats.turns).sum(),
            idle_turns: on_core.iter().map(|l| l.stats.idle_turns).sum(),
            instructions: on_core.iter().map(|l| l.stats.instructions).sum(),
        }
    }

    /// Adds another run's use.
    pub fn add(&mut self, o: &LaneCoreUse) {
        // The first run sets whether instructions were counted.
        let first = self.wall_ns == 0;
        self.instructions = match (self.instructions, o.instructions) {
            (Some(a), Some(b)) => Some(a + b),
            (None, b) if first => b,
            _ => None,
        };
        self.polling |= o.polling;
        self.turns += o.turns;
        self.idle_turns += o.idle_turns;
        self.threads = self.threads.max(o.threads);
        self.wall_ns += o.wall_ns;
        self.thread = self.thread.add(&o.thread);
        self.packets += o.packets;
        self.socket_drops += o.socket_drops;
        let c = &mut self.cpu;
        c.user += o.cpu.user;
        c.system += o.cpu.system;
        c.irq += o.cpu.irq;
        c.softirq += o.cpu.softirq;
        c.idle += o.cpu.idle;
        c.steal += o.cpu.steal;
    }

    /// The budget, with the machine's share from the floor probe of the
    /// lane core (`machine_fraction`).
    pub fn budget(&self, machine_fraction: f64) -> LaneCoreBudget {
        let busy = self.thread.cpu_ns as f64 / self.wall_ns.max(1) as f64;
        let headroom = if self.polling {
            self.idle_turns as f64 / self.turns.max(1) as f64
        } else {
            1.0 - machine_fraction - busy
        };
        LaneCoreBudget {
            polling: self.polling,
            instructions_per_packet: self
                .instructions
                .map(|n| n as f64 / self.packets.max(1) as f64),
            threads: self.threads,
            busy_fraction: busy,
            machine_fraction,
            headroom,
            wakeups: self.thread.wakeups(),
            preemptions: self.thread.involuntary,
            packets: self.packets,
            wakeups_per_packet: self.thread.wakeups() as f64 / self.packets.max(1) as f64,
            probe_wakeups: self.wall_ns / crate::interference::FLOOR_INTERVAL_NS,
            socket_drops: self.socket_drops,
            saturated: headroom < SATURATION_HEADROOM,
            cpu: self.cpu.shares(),
        }
    }
}

/// The lane core's budget as reports carry it (`lane_core` in the JSON).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LaneCoreBudget {
    /// Lane loop threads on the lane core.
    pub threads: usize,
    /// Their CPU time ÷ the run's wall time.
    pub busy_fraction: f64,
    /// What the machine took from a real-time thread there (floor probe).
    pub machine_fraction: f64,
    /// 1 − machine − busy; for polling loops, the share of their turns
    /// that found nothing to do.
    pub headroom: f64,
    /// Whether the loops polled (then `headroom` is their idle turns' share).
    pub polling: bool,
    /// The loops' instructions per packet sent or read (`None` where the
    /// machine has no instruction counter).
    pub instructions_per_packet: Option<f64>,
    /// Times the lane threads woke from a sleep (voluntary switches).
    pub wakeups: u64,
    /// Times they were preempted while runnable (involuntary switches; the
    /// floor probe above them causes most).
    pub preemptions: u64,
    /// Frames sent plus datagrams read by them.
    pub packets: u64,
    /// Wake-ups of the floor probe on the lane core over the loops' runs
    /// (one every [`crate::interference::FLOOR_INTERVAL_NS`]): the probe
    /// runs above the lane loop, so each one that finds the loop running
    /// preempts it. A polling loop always runs, so nearly all its
    /// preemptions are these.
    pub probe_wakeups: u64,
    /// `wakeups ÷ packets`.
    pub wakeups_per_packet: f64,
    /// Datagrams dropped at the lane's receiving sockets (buffer full).
    pub socket_drops: u64,
    /// Headroom below 10 %.
    pub saturated: bool,
    /// The lane core's time by kind (`/proc/stat`): user, system, irq,
    /// softirq (the kernel's network work of every flow the core touched),
    /// idle, steal.
    pub cpu: CpuShares,
}

impl LaneCoreBudget {
    /// Two lines for a text report (three when saturated).
    pub fn render(&self, lane_core: usize) -> String {
        let pct = |x: f64| format!("{:.1}%", 100.0 * x);
        let headroom = if self.polling {
            format!(
                "polling: headroom {} (turns that found nothing to do)",
                pct(self.headroom)
            )
        } else {
            format!("headroom {}", pct(self.headroom))
        };
        let mut s = format!(
            "lane core {lane_core}: lane loop {} ({} thread{}), machine {}, {headroom}; \
             {:.3} wake-ups per packet ({} for {} packets; {} preemptions, against {} wake-ups \
             of the floor probe above it), {} socket drops\n",
            pct(self.busy_fraction),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            pct(self.machine_fraction),
            self.wakeups_per_packet,
            self.wakeups,
            self.packets,
            self.preemptions,
            self.probe_wakeups,
            self.socket_drops,
        );
        let c = &self.cpu;
        s.push_str(&format!(
            "  lane core time by kind: softirq {}, system {}, user {}, irq {}, idle {}, steal {}\n",
            pct(c.softirq),
            pct(c.system),
            pct(c.user),
            pct(c.irq),
            pct(c.idle),
            pct(c.steal)
        ));
        match self.instructions_per_packet {
            Some(n) => s.push_str(&format!(
                "  lane loop work: {n:.0} instructions per packet (processor counter)\n"
            )),
            None => s.push_str(
                "  lane loop work: instructions not counted (this machine offers no instruction counter)\n",
            ),
        }
        if self.saturated {
            s.push_str(&format!(
                "  SATURATED: the lane core had {} headroom (under {}): packets lost in this run \
                 are attributed to the saturated core\n",
                pct(self.headroom),
                pct(SATURATION_HEADROOM)
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sleeping loop's headroom is what its core had left; a polling
    /// loop's is the share of its turns that found nothing to do, however
    /// busy it kept the core. Instructions per packet only where counted.
    #[test]
    fn headroom_of_sleeping_and_polling_loops() {
        // (polling, cpu ns of 1 s, turns, idle turns, instructions,
        //  want headroom, want saturated, want instructions per packet)
        type Case = (bool, u64, u64, u64, Option<u64>, f64, bool, Option<f64>);
        let cases: [Case; 4] = [
            (false, 200_000_000, 0, 0, None, 0.75, false, None),
            (
                false,
                930_000_000,
                0,
                0,
                Some(5_000_000),
                0.02,
                true,
                Some(500.0),
            ),
            (true, 950_000_000, 1_000, 900, None, 0.9, false, None),
            (
                true,
                950_000_000,
                1_000,
                50,
                Some(1_000_000),
                0.05,
                true,
                Some(100.0),
            ),
        ];
        for (polling, cpu_ns, turns, idle_turns, instructions, head, sat, ipp) in cases {
            let mut u = LaneCoreUse::default();
            u.add(&LaneCoreUse {
                threads: 1,
                wall_ns: 1_000_000_000,
                thread: ThreadUsage {
                    cpu_ns,
                    ..ThreadUsage::default()
                },
                packets: 10_000,
                polling,
                turns,
                idle_turns,
                instructions,
                ..LaneCoreUse::default()
            });
            let b = u.budget(0.05);
            assert!((b.headroom - head).abs() < 1e-9, "{b:?}");
            assert_eq!(b.saturated, sat, "{b:?}");
            assert_eq!(b.instructions_per_packet, ipp, "{b:?}");
            let text = b.render(1);
            assert_eq!(text.contains("polling"), polling, "{text}");
            assert_eq!(text.contains("SATURATED"), sat, "{text}");
        }
    }
}
