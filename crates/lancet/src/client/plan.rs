//! The agents of a run: how many, at which rate, on how many connections,
//! and which of them stamp.

use crate::config::{AgentKind, ClientConfig};

#[derive(Clone, Copy, Debug)]
pub(super) struct AgentPlan {
    pub(super) index: usize,
    pub(super) rate: f64,
    pub(super) conns: usize,
    pub(super) measure: bool,
}

pub(super) fn plan_agents(cfg: &ClientConfig) -> Vec<AgentPlan> {
    let mut out = Vec::new();
    let load = |rate: f64, measure: bool, out: &mut Vec<AgentPlan>| {
        let t = cfg.threads;
        for i in 0..t {
            let conns = cfg.conns / t + usize::from(i < cfg.conns % t);
            out.push(AgentPlan {
                index: out.len(),
                rate: rate / t as f64,
                conns,
                measure,
            });
        }
    };
    match cfg.agent {
        AgentKind::Throughput => load(cfg.rate, false, &mut out),
        AgentKind::Symmetric => load(cfg.rate, true, &mut out),
        AgentKind::Latency => {
            let lr = cfg.latency_rate.unwrap_or(cfg.rate);
            out.push(AgentPlan {
                index: 0,
                rate: lr,
                conns: 1,
                measure: true,
            });
            // The rest of the rate, if it matters (float leftovers do not).
            if cfg.rate - lr > cfg.rate * 1e-9 {
                load(cfg.rate - lr, false, &mut out);
            }
        }
    }
    out
}
