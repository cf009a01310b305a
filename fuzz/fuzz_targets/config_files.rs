//! Fuzz target: arbitrary text through the parsers of the files users hand
//! the controller: the topology (`xlane_te::Topology::from_toml`) and the
//! keys file (`xlane_ctl::auth::Keys::from_toml`). Bad input must give a
//! typed error, never a panic; a topology that parses must pass the
//! allocator's own invariant check with one tunnel between its first two
//! hosts, whether or not that tunnel is granted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_ctl::auth::Keys;
use xlane_ctl::te::alloc::{Allocator, Request, TeConfig};
use xlane_ctl::te::topology::{NodeKind, Topology};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Keys::from_toml(text);
    let Ok(topo) = Topology::from_toml(text) else {
        return;
    };
    let hosts: Vec<String> = topo
        .nodes()
        .iter()
        .filter(|n| n.kind == NodeKind::Host)
        .map(|n| n.name.clone())
        .take(2)
        .collect();
    let mut a = Allocator::new(topo, TeConfig::default());
    if let [s, r] = &hosts[..] {
        let _ = a.request(&Request {
            sender: s.clone(),
            receivers: vec![r.clone()],
            load_bytes: 100,
            period_ns: 1_000_000,
            sublane: 0,
        });
    }
    a.verify().expect("allocator invariants hold");
});
