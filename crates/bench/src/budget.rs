//! The lane core's budget in every lane report: what the lane loop itself
//! took from the core, what the machine took (the floor probe), what is
//! left, and where the core's time went by kind (`/proc/stat`).
//!
//! Headroom = 1 − machine − lane. Below [`SATURATION_HEADROOM`] the lane
//! core is saturated: the report says so in one line, the JSON carries
//! `"saturated": true`, and packets lost in such a run are attributed to
//! it.

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
        }
    }

    /// Adds another run's use.
    pub fn add(&mut self, o: &LaneCoreUse) {
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
        let headroom = 1.0 - machine_fraction - busy;
        LaneCoreBudget {
            threads: self.threads,
            busy_fraction: busy,
            machine_fraction,
            headroom,
            wakeups: self.thread.wakeups(),
            preemptions: self.thread.involuntary,
            packets: self.packets,
            wakeups_per_packet: self.thread.wakeups() as f64 / self.packets.max(1) as f64,
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
    /// 1 − machine − busy.
    pub headroom: f64,
    /// Times the lane threads woke from a sleep (voluntary switches).
    pub wakeups: u64,
    /// Times they were preempted while runnable (involuntary switches; the
    /// floor probe above them causes most).
    pub preemptions: u64,
    /// Frames sent plus datagrams read by them.
    pub packets: u64,
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
        let mut s = format!(
            "lane core {lane_core}: lane loop {} ({} thread{}), machine {}, headroom {}; \
             {:.3} wake-ups per packet ({} for {} packets; {} preemptions), {} socket drops\n",
            pct(self.busy_fraction),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            pct(self.machine_fraction),
            pct(self.headroom),
            self.wakeups_per_packet,
            self.wakeups,
            self.packets,
            self.preemptions,
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
