//! Part 1's replay: the arrival sequences of every pair through the suspicion
//! models, accumulated as levels per detector.

use crate::attribution::GapIndex;
use crate::fd_gaps::{min_perfect_outside_gaps, OutsideGaps, Shape, Silence};
use crate::flows::{FlowResult, FlowSample};
use crate::interference::BenchError;
use std::collections::BTreeMap;
use xlane_fd::{
    replay, Anchor, Arrival, FixedTimeout, ModelKind, PhiAccrual, PhiParams, ReplaySummary,
    SuspicionModel,
};

/// Levels of one detector accumulated over pairs and rounds.
#[derive(Default)]
pub(super) struct Levels {
    pub(super) levels: Vec<f64>,
    /// Phi only: (μ, σ) before each interval's end.
    pub(super) moments: Vec<(f64, f64)>,
    pub(super) arrivals: u64,
    /// Silences to check against host gaps: every interval whose level is
    /// above the tracking threshold.
    pub(super) tail: Vec<Silence>,
    /// The highest level of the intervals not in `tail` (kept whole).
    pub(super) rest_max: Option<f64>,
}

/// Timeout levels (ns) above which an interval is checked against host gaps.
const TRACK_TIMEOUT_NS: f64 = 100_000.0;
/// Phi levels above which an interval is checked against host gaps.
const TRACK_PHI: f64 = 3.0;

impl Levels {
    fn track(&mut self, s: Silence, above: f64) {
        if s.level > above {
            self.tail.push(s);
        } else {
            self.rest_max = Some(self.rest_max.map_or(s.level, |m| m.max(s.level)));
        }
    }

    /// The strict host-gap rule over the tracked silences ([`crate::fd_gaps`]).
    pub(super) fn outside_gaps(&self, gaps: &GapIndex) -> OutsideGaps {
        min_perfect_outside_gaps(self.rest_max, &self.tail, gaps)
    }

    fn add(&mut self, s: ReplaySummary) {
        self.arrivals += s.arrivals;
        self.levels.extend(s.levels);
    }

    pub(super) fn summary(mut self, kind: ModelKind) -> (ReplaySummary, Vec<(f64, f64)>) {
        self.levels.sort_by(f64::total_cmp);
        (
            ReplaySummary {
                kind,
                arrivals: self.arrivals,
                levels: self.levels,
            },
            self.moments,
        )
    }
}

/// X-FD's timeout through one arrival sequence (ascending), keeping the
/// silences above [`TRACK_TIMEOUT_NS`] for the host-gap view.
fn replay_timeout_tracked(period_ns: u64, arrivals: &[Arrival], into: &mut Levels) {
    let mut m = FixedTimeout::new(period_ns, Anchor::Arrival);
    let mut prev: Option<u64> = None;
    for a in arrivals {
        if let (Some(l), Some(p)) = (m.on_arrival(*a), prev) {
            into.levels.push(l);
            into.track(
                Silence {
                    from_ns: p,
                    to_ns: a.rx_ns,
                    level: l,
                    shape: Shape::Timeout,
                },
                TRACK_TIMEOUT_NS,
            );
        }
        prev = Some(prev.map_or(a.rx_ns, |p| p.max(a.rx_ns)));
    }
    into.arrivals += arrivals.len() as u64;
}

/// Phi through one arrival sequence (ascending), keeping its estimates
/// (and, with `track`, the silences above [`TRACK_PHI`]).
fn replay_phi(
    params: PhiParams,
    arrivals: &[Arrival],
    into: &mut Levels,
    track: bool,
) -> Result<(), BenchError> {
    let mut m = PhiAccrual::new(params).map_err(|e| BenchError::Config(e.to_string()))?;
    let mut prev: Option<u64> = None;
    for a in arrivals {
        let before = m.mean_std();
        if let Some(l) = m.on_arrival(*a) {
            let l = if l.is_nan() { f64::INFINITY } else { l };
            into.levels.push(l);
            into.moments.push(before);
            if let (true, Some(p)) = (track, prev) {
                let shape = Shape::Phi {
                    mean_ns: before.0,
                    std_ns: before.1,
                };
                into.track(
                    Silence {
                        from_ns: p,
                        to_ns: a.rx_ns,
                        level: l,
                        shape,
                    },
                    TRACK_PHI,
                );
            }
        }
        prev = Some(prev.map_or(a.rx_ns, |p| p.max(a.rx_ns)));
    }
    into.arrivals += arrivals.len() as u64;
    Ok(())
}

/// Every detector's levels, user and kernel clocks.
pub(super) struct Accumulators {
    pub(super) xfd: Levels,
    /// X-FD of the polling rounds of a run that compares both ways of
    /// waiting (the detector's own clock only).
    pub(super) xfd_poll: Levels,
    pub(super) xfd_kernel: Levels,
    pub(super) xfd_send: Levels,
    pub(super) plain: Levels,
    pub(super) plain_kernel: Levels,
    pub(super) plain_send: Levels,
    pub(super) phi: Levels,
    pub(super) phi_kernel: Levels,
    pub(super) lane_sent: u64,
    /// Heartbeats sent in the polling rounds.
    pub(super) lane_sent_poll: u64,
    pub(super) plain_sent: u64,
}

/// Arrival sequences per (receiver, sender) pair of a set of flows.
pub(super) fn pairs(flows: &[FlowResult], receivers: &[Vec<usize>]) -> Vec<Vec<FlowSample>> {
    let mut out = Vec::new();
    for (fi, f) in flows.iter().enumerate() {
        let mut by_rx: BTreeMap<usize, Vec<FlowSample>> = BTreeMap::new();
        for s in &f.samples {
            let host = receivers[fi]
                .get(s.receiver as usize)
                .copied()
                .unwrap_or(usize::MAX);
            by_rx.entry(host).or_default().push(*s);
        }
        out.extend(by_rx.into_values());
    }
    out
}

fn arrivals(samples: &mut [FlowSample], kernel: bool) -> Vec<Arrival> {
    if kernel {
        samples.sort_by_key(|s| s.sample.kernel_rx_ns);
    } else {
        samples.sort_by_key(|s| s.sample.user_rx_ns);
    }
    samples
        .iter()
        .map(|s| Arrival {
            rx_ns: if kernel {
                s.sample.kernel_rx_ns
            } else {
                s.sample.user_rx_ns
            },
            send_ns: Some(s.sample.send_ns),
        })
        .collect()
}

impl Accumulators {
    pub(super) fn new() -> Self {
        Accumulators {
            xfd: Levels::default(),
            xfd_poll: Levels::default(),
            xfd_kernel: Levels::default(),
            xfd_send: Levels::default(),
            plain: Levels::default(),
            plain_kernel: Levels::default(),
            plain_send: Levels::default(),
            phi: Levels::default(),
            phi_kernel: Levels::default(),
            lane_sent: 0,
            lane_sent_poll: 0,
            plain_sent: 0,
        }
    }

    /// One round's arrivals; `polling`: its lane heartbeats go to the
    /// polling X-FD.
    pub(super) fn add_round(
        &mut self,
        period_ns: u64,
        lane: Vec<Vec<FlowSample>>,
        plain: Vec<Vec<FlowSample>>,
        polling: bool,
    ) -> Result<(), BenchError> {
        let timeout = |anchor| FixedTimeout::new(period_ns, anchor);
        for mut p in lane {
            let user = arrivals(&mut p, false);
            if polling {
                replay_timeout_tracked(period_ns, &user, &mut self.xfd_poll);
                continue;
            }
            replay_timeout_tracked(period_ns, &user, &mut self.xfd);
            self.xfd_send
                .add(replay(&mut timeout(Anchor::SendTime), user));
            let kernel = arrivals(&mut p, true);
            self.xfd_kernel
                .add(replay(&mut timeout(Anchor::Arrival), kernel));
        }
        let params = PhiParams::for_period(period_ns);
        for mut p in plain {
            let user = arrivals(&mut p, false);
            replay_timeout_tracked(period_ns, &user, &mut self.plain);
            self.plain_send
                .add(replay(&mut timeout(Anchor::SendTime), user.iter().copied()));
            replay_phi(params, &user, &mut self.phi, true)?;
            let kernel = arrivals(&mut p, true);
            self.plain_kernel.add(replay(
                &mut timeout(Anchor::Arrival),
                kernel.iter().copied(),
            ));
            replay_phi(params, &kernel, &mut self.phi_kernel, false)?;
        }
        Ok(())
    }
}
