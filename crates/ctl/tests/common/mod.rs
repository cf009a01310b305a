//! Shared helpers for the controller's tests.
#![allow(dead_code)]

use xlane_ctl::core::{Controller, Policy, Principal};
use xlane_te::{TeConfig, Topology};

/// The testbed's 4-host star (h0..h3 around `sw`, 1 Gbit/s, queues of 64).
pub fn star4() -> Topology {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../te/tests/data/testbed_star4.toml"
    );
    Topology::from_file(p.as_ref()).expect("fixture topology")
}

pub fn star4_path() -> std::path::PathBuf {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../te/tests/data/testbed_star4.toml"
    )
    .into()
}

/// A policy with small, explicit numbers.
pub fn policy() -> Policy {
    Policy {
        exceed_tolerance_permille: 100,
        terminate_after: 2,
        unused_permille: 250,
        unused_intervals: 3,
        reclaim_factor: 2,
        grace_ns: 1_000_000,
        te_grace_ns: 0,
    }
}

pub fn controller(policy: Policy) -> Controller {
    Controller::new(star4(), TeConfig::default(), policy)
}

pub fn host(h: &str) -> Principal {
    Principal::Host(h.to_string())
}

pub fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A small seeded generator (xorshift64*), so failures replay from the seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
