//! How long a one-byte write takes to a page that has not been written for
//! a while, side by side with one that has: the reason the AF_XDP path's
//! UMEM is small ([`xlane_host::xdp::FRAMES`]).
//!
//! Two anonymous mappings, a small and a large one, are written in turn,
//! one byte per page, cycling through each mapping's pages, with a pause
//! between rounds. A page of the small set is written again soon; a page of
//! the large set only after `large × gap`. On bare metal both writes cost
//! nanoseconds. On some virtual machines the hypervisor write-protects or
//! ages guest memory in the background, and the first write to a page
//! after that exits to the host: the vCPU stalls, sometimes for 100 µs and
//! more, with no page fault visible in the guest.
//!
//! ```text
//! cargo run --release -p xlane-host --example page_writes -- --seconds 10
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

const PAGE: usize = 4096;

struct Args {
    small: usize,
    large: usize,
    gap_us: u64,
    seconds: u64,
}

const HELP: &str = "\
page_writes: write stalls on pages not written recently, side by side

Options:
  --small <PAGES>    pages in the small set [default: 32, the UMEM's]
  --large <PAGES>    pages in the large set [default: 512, a 1 024-frame UMEM's]
  --gap-us <US>      pause between rounds, µs [default: 200, the lane's period]
  --seconds <S>      how long to run [default: 10]
  -h, --help         print this";

fn parse() -> Result<Args, String> {
    let mut a = Args {
        small: 32,
        large: 512,
        gap_us: 200,
        seconds: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{HELP}");
            std::process::exit(0);
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: {value:?} is not a whole number"))?;
        match flag.as_str() {
            "--small" => a.small = n as usize,
            "--large" => a.large = n as usize,
            "--gap-us" => a.gap_us = n,
            "--seconds" => a.seconds = n,
            _ => return Err(format!("unknown option {flag} (see --help)")),
        }
    }
    if a.small == 0 || a.large == 0 || a.small > 1 << 20 || a.large > 1 << 20 {
        return Err("--small and --large take 1 to 1 048 576 pages".into());
    }
    Ok(a)
}

/// Write times of one set: counts over 2 µs and over 20 µs, the longest.
#[derive(Default)]
struct Tally {
    over_2us: u64,
    over_20us: u64,
    max_ns: u64,
}

impl Tally {
    fn add(&mut self, ns: u64) {
        self.over_2us += u64::from(ns > 2_000);
        self.over_20us += u64::from(ns > 20_000);
        self.max_ns = self.max_ns.max(ns);
    }
}

/// One byte per page, timed.
fn timed_write(set: &mut [u8], page: usize, v: u8) -> u64 {
    let t = Instant::now();
    set[page * PAGE + 64] = black_box(v);
    t.elapsed().as_nanos() as u64
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("page_writes: {e}");
            std::process::exit(2);
        }
    };
    // Touched once up front: every later write finds its page present.
    let mut small = vec![1u8; a.small * PAGE];
    let mut large = vec![1u8; a.large * PAGE];
    let (mut ts, mut tl) = (Tally::default(), Tally::default());
    let gap = Duration::from_micros(a.gap_us);
    let end = Instant::now() + Duration::from_secs(a.seconds);
    let mut n = 0usize;
    while Instant::now() < end {
        // Alternate which set goes first, so neither gains from order.
        let v = n as u8;
        if n % 2 == 0 {
            ts.add(timed_write(&mut small, n % a.small, v));
            tl.add(timed_write(&mut large, n % a.large, v));
        } else {
            tl.add(timed_write(&mut large, n % a.large, v));
            ts.add(timed_write(&mut small, n % a.small, v));
        }
        n += 1;
        // A spin, not a sleep: the thread stays on its core.
        let wake = Instant::now() + gap;
        while Instant::now() < wake {
            std::hint::spin_loop();
        }
    }
    println!(
        "{n} writes to each set, one every {} µs; a page is written again after",
        a.gap_us
    );
    for (name, pages, t) in [("small", a.small, &ts), ("large", a.large, &tl)] {
        println!(
            "  {name:5} {pages:>5} pages ({:>8.1} ms): {:>6} writes over 2 µs, {:>6} over 20 µs, longest {:.1} µs",
            pages as f64 * a.gap_us as f64 / 1e3,
            t.over_2us,
            t.over_20us,
            t.max_ns as f64 / 1e3
        );
    }
    println!(
        "over 20 µs, large / small: {}",
        match ts.over_20us {
            0 if tl.over_20us == 0 => "none in either".to_string(),
            0 => format!("{} against none", tl.over_20us),
            s => format!("{:.1}×", tl.over_20us as f64 / s as f64),
        }
    );
}
