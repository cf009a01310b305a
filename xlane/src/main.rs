//! `xlane`: the one command-line entry point.
// Doc comments of the command's flags are its `--help` text, where
// placeholders such as `<id>` read as they should.
#![allow(rustdoc::invalid_html_tags)]

mod cmd;

/// mimalloc serves every allocation of the command (as jemalloc serves
/// Redis's): its per-thread free lists keep a member's allocations of a
/// turn (requests, raft messages, replies) off the shared heap, where glibc's
/// thread arenas grew and shrank the heap (`mprotect`, page faults) every
/// few turns of an `xlane kv serve` member under load.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process. mimalloc asks the
/// kernel for huge pages on its arenas (`MADV_HUGEPAGE`), so the first touch
/// of a fresh arena page after a purge faulted in and zeroed 2 MiB at once:
/// `clear_page_erms` was 9 % of an `xlane kv serve` member's time under
/// `redis-benchmark -P 16 -t lpush`, and a fault of that size on a lane
/// thread is a stall of tens of microseconds. With 4 KiB pages a fault
/// zeroes only what is touched. If the kernel refuses, nothing changes.
fn no_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// xlane: an express lane for datacenter coordination traffic.
#[derive(Parser)]
#[command(name = "xlane", version, about, long_about = None, args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Settings from a TOML file: each key is a long flag of the command
    /// (`bind = "..."`, `peer = ["...", "..."]`, `quiet = true`); flags on
    /// the command line override it (list flags add to it).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// The emulated datacenter: hosts and a switch in network namespaces.
    Testbed(cmd::testbed::Args),
    /// Check every jitter source of the host and say how to fix it.
    Doctor(cmd::doctor::Args),
    /// Measurements run side by side in one run.
    Bench(cmd::bench::Args),
    /// Open-loop latency measurement against any UDP or TCP server.
    Lancet(cmd::lancet::Args),
    /// X-FD: the failure detector on the express lane.
    Fd(cmd::fd::Args),
    /// The X-Lane controller: tunnel allocation daemon, keys, and client.
    Ctl(cmd::ctl::Args),
    /// Host mode on a real machine: enforce this host's granted tunnels on
    /// its own interface (classes, rates, DSCP marking), restored on exit.
    Host(cmd::host::Args),
    /// A Redis-compatible (RESP2 and RESP3) key-value server, replicated by X-Raft.
    Kv(cmd::kv::Args),
    /// R2P2 request-reply RPCs on the regular lane: the router.
    Rpc(cmd::rpc::Args),
    /// 1Pipe, totally ordered scattering: the hop daemon.
    Pipe(cmd::pipe::Args),
    /// Run an unmodified program on a QJump level: its sockets marked
    /// (preloaded, or by port for static and Go binaries), the level paced
    /// to its rate, the level's latency bound printed.
    Run(cmd::run::Args),
}

fn main() -> ExitCode {
    no_huge_pages();
    let args = match xlane_cli::config::expand(std::env::args_os().collect(), &Cli::command()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xlane: error: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    xlane_cli::logging::init();
    let result = match cli.command {
        Command::Testbed(a) => cmd::testbed::run(a),
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Lancet(a) => cmd::lancet::run(a),
        Command::Fd(a) => cmd::fd::run(a),
        Command::Ctl(a) => cmd::ctl::run(a),
        Command::Host(a) => cmd::host::run(a),
        Command::Kv(a) => cmd::kv::run(a),
        Command::Rpc(a) => cmd::rpc::run(a),
        Command::Pipe(a) => cmd::pipe::run(a),
        Command::Run(a) => cmd::run::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xlane: error: {e}");
            let mut src = e.source();
            while let Some(s) = src {
                eprintln!("  caused by: {s}");
                src = s.source();
            }
            ExitCode::FAILURE
        }
    }
}
