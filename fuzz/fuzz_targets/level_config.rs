//! Fuzz the parsers of `xlane run` and its preload library: the
//! environment configuration (three values split at NUL bytes), the port
//! list, and the ELF check. None may panic; a parsed port list holds only
//! listed, non-zero ports.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_level::{elf_kind, parse_config, parse_ports};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0);
    let (a, b, c) = (parts.next(), parts.next(), parts.next());
    if let Ok(Some(cfg)) = parse_config(a, b, c) {
        assert!(cfg.priority <= 6);
        assert!(cfg.ports.as_slice().iter().all(|&p| p != 0));
    }
    if let Ok(set) = parse_ports(data) {
        assert!(set.as_slice().len() <= 32);
    }
    let _ = elf_kind(data);
});
