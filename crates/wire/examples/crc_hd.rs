//! Prints the minimum Hamming distance of the candidate 32-bit CRC polynomials at
//! the two chunk lengths of the lane frame, the number of undetected error patterns
//! of that weight, and a Koopman-style HD profile compared with his published values.
//!
//! Run: `cargo run -p xlane-wire --example crc_hd --release`

use std::time::Instant;
use xlane_wire::crc_choice::{
    count_codewords, hamming_distance, profile, Distance, CANDIDATES, CHOSEN, KOOPMAN_PUBLISHED,
};
use xlane_wire::Schema;

fn main() {
    let t0 = Instant::now();
    println!("Minimum Hamming distance per chunk length (codeword = whole chunk incl. CRC)");
    println!(
        "{:<22} {:>11} {:>6} {:>4} {:>14} {:>22}  shortest undetected pattern",
        "polynomial", "normal", "bits", "HD", "A_HD", "P_ud @ BER 1e-6"
    );
    let targets = [
        ("Schema::Chunk26 chunk", Schema::Chunk26.chunk_len()),
        ("Schema::Chunk36 chunk", Schema::Chunk36.chunk_len()),
        ("frame header", xlane_wire::HEADER_LEN),
    ];
    for (what, bytes) in targets {
        let n = bytes * 8;
        println!(
            "-- {what}: {bytes} B, {} protected bytes + 4 CRC bytes, {n} codeword bits",
            bytes - 4
        );
        for c in CANDIDATES {
            let d = hamming_distance(c.poly, n, 8).expect("valid arguments");
            match d {
                Distance::Exactly { hd, witness } => {
                    let a = count_codewords(c.poly, n, hd).expect("valid arguments");
                    let p_ud = a as f64 * 1e-6f64.powi(hd as i32);
                    let chosen = CHOSEN
                        .iter()
                        .any(|ch| ch.bytes == bytes && ch.candidate == c);
                    println!(
                        "{:<22} {:#010x} {:>6} {:>4} {:>14} {:>22.3e}  {}{}",
                        c.name,
                        c.poly,
                        n,
                        hd,
                        a,
                        p_ud,
                        witness,
                        if chosen { "   <= chosen" } else { "" }
                    );
                }
                Distance::Above(w) => {
                    println!("{:<22} {:#010x} {:>6} >{w}", c.name, c.poly, n)
                }
            }
        }
    }

    let limit = 320;
    println!();
    println!(
        "HD profile up to {} dataword bits (longest dataword length with HD >= h), vs Koopman",
        limit - 32
    );
    for c in CANDIDATES {
        let prof = profile(c.poly, limit, 9).expect("valid arguments");
        let published = KOOPMAN_PUBLISHED
            .iter()
            .find(|(k, _)| *k == c.koopman())
            .map(|(_, v)| *v)
            .unwrap_or(&[]);
        print!("{:<22} koopman {:#010x}:", c.name, c.koopman());
        let mut all_agree = true;
        for (h, len) in &prof {
            let ours = match len {
                Some(l) => format!("{l}"),
                None => format!(">={}", limit - 32),
            };
            // The published length for HD >= h is the one of the smallest listed HD >= h.
            let pubv = published
                .iter()
                .filter(|(ph, _)| *ph >= *h)
                .map(|(_, l)| *l)
                .max();
            let agree = match (len, pubv) {
                (Some(l), Some(p)) => *l == p,
                (None, Some(p)) => p >= limit - 32,
                (_, None) => true,
            };
            all_agree &= agree;
            print!(" HD{h}:{ours}");
        }
        if published.is_empty() {
            println!("  (no published profile at hand)");
        } else {
            println!(
                "  published {:?} -> {}",
                published,
                if all_agree { "agree" } else { "DISAGREE" }
            );
        }
    }
    eprintln!("({:.1} s)", t0.elapsed().as_secs_f64());
}
