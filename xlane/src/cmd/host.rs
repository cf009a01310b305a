//! `xlane host`: host mode on a real machine (no testbed).
//!
//! The agent takes the host's interface ([`xlane_netcfg::host::Egress`]),
//! reads the controller's tunnel list every `--poll-ms`, and enforces the
//! tunnels this host sends on: a class per tunnel at its granted rate on
//! the interface's egress, its packets marked with its sub-lane's DSCP (a
//! demoted tunnel's with best effort's). On SIGTERM or SIGINT it puts the
//! interface back and prints one JSON line with its counters.
//!
//! Given a replicated controller's replicas (`--controller A,B,C`) it reads
//! from whichever serves; when that connection fails it goes through the
//! whole list again at the next poll (and every poll after, until one
//! serves), keeping what it enforces meanwhile.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlane_ctl::client::Client;
use xlane_host::tuning::install_termination_flag;
use xlane_netcfg::host::{host_port, wanted, Egress};

/// Arguments of `xlane host`.
#[derive(clap::Args)]
pub struct Args {
    /// Topology TOML the controller serves: this host's link gives the
    /// rate and queue lengths, the file the express DSCPs and class shares.
    #[arg(long)]
    topology: PathBuf,
    /// This host's name in the topology (and in the keys file).
    #[arg(long)]
    host: String,
    /// Keys file holding --host's key (`xlane ctl keygen`).
    #[arg(long)]
    keys: PathBuf,
    /// The controller; a replicated controller's replicas comma-separated
    /// (the serving one is found, and found again through the whole list
    /// after a takeover).
    #[arg(long, default_value = "127.0.0.1:7070", value_delimiter = ',')]
    controller: Vec<SocketAddr>,
    /// The interface to enforce on: the host's link towards the network.
    /// Its root qdisc must be the kernel's default; it is restored on exit.
    #[arg(long)]
    iface: String,
    /// How often the controller's tunnel list is read, ms: a grant, change
    /// or demotion is enforced within one poll.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    poll_ms: u64,
    /// Stop after this many seconds (0: until SIGTERM or SIGINT).
    #[arg(long, default_value_t = 0)]
    seconds: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics: polls, errors,
    /// changes, tunnels enforced by state.
    #[arg(long)]
    metrics: Option<SocketAddr>,
}

/// Counters shared with the metrics endpoint.
#[derive(Default)]
struct Counters {
    polls: AtomicU64,
    poll_errors: AtomicU64,
    apply_errors: AtomicU64,
    changes: AtomicU64,
    active: AtomicU64,
    demoted: AtomicU64,
}

fn host_metrics(c: &Counters) -> Vec<xlane_metrics::Family> {
    use xlane_metrics::{Family, Kind};
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
    vec![
        Family::one(
            "xlane_host_polls_total",
            "Tunnel lists read from the controller.",
            Kind::Counter,
            get(&c.polls),
        ),
        Family::one(
            "xlane_host_poll_errors_total",
            "Polls that failed (controller unreachable, refused, or a truncated list).",
            Kind::Counter,
            get(&c.poll_errors),
        ),
        Family::one(
            "xlane_host_apply_errors_total",
            "Changes to the interface that failed (tried again at the next poll).",
            Kind::Counter,
            get(&c.apply_errors),
        ),
        Family::one(
            "xlane_host_changes_total",
            "Tunnel classes added, re-steered or removed on the interface.",
            Kind::Counter,
            get(&c.changes),
        ),
        Family::by(
            "xlane_host_tunnels",
            "Tunnels this host enforces, by state.",
            Kind::Gauge,
            "state",
            &[("active", get(&c.active)), ("demoted", get(&c.demoted))],
        ),
    ]
}

/// Run the agent.
pub fn run(a: Args) -> super::CmdResult {
    let topo = xlane_testbed::Topology::read_from(&a.topology)?;
    let (rate_bps, shaping) = host_port(&topo, &a.host)?;
    let key = super::ctl::host_key(&a.keys, &a.host)?;
    let stop = install_termination_flag();
    let mut egress = Egress::take(&a.iface, rate_bps, shaping)?;
    let counters = Arc::new(Counters::default());
    let _exporter = match a.metrics {
        Some(m) => {
            let c = Arc::clone(&counters);
            let e = xlane_metrics::Exporter::serve(m, Arc::new(move || host_metrics(&c)))
                .map_err(|e| format!("--metrics {m}: {e}"))?;
            tracing::info!("metrics at http://{}/metrics", e.local_addr());
            Some(e)
        }
        None => None,
    };
    println!(
        "{}",
        serde_json::json!({
            "event": "ready", "host": a.host, "iface": a.iface,
            "rate_bps": rate_bps, "chain": egress.chain(),
        })
    );
    let start = Instant::now();
    let poll = Duration::from_millis(a.poll_ms);
    let mut client: Option<Client> = None;
    let mut down_since: Option<String> = None;
    while !stop.load(Ordering::Relaxed) && (a.seconds == 0 || start.elapsed().as_secs() < a.seconds)
    {
        let next = Instant::now() + poll;
        if client.is_none() {
            match super::ctl::connect_as(&a.controller, &a.host, &key) {
                Ok(c) => client = Some(c),
                Err(e) => {
                    if down_since.as_deref() != Some(&e) {
                        tracing::warn!("{e} (retrying every poll)");
                        down_since = Some(e);
                    }
                    counters.poll_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if let Some(c) = client.as_mut() {
            match c.list() {
                Ok((_, true)) => {
                    // Enforcing part of the list would remove the rest.
                    tracing::warn!("the controller's tunnel list is truncated; nothing changed");
                    counters.poll_errors.fetch_add(1, Ordering::Relaxed);
                }
                Ok((list, false)) => {
                    down_since = None;
                    counters.polls.fetch_add(1, Ordering::Relaxed);
                    let applied = wanted(&a.host, &list)
                        .map_err(|e| e.to_string())
                        .and_then(|w| egress.apply(&w).map_err(|e| e.to_string()));
                    match applied {
                        Ok(0) => {}
                        Ok(n) => {
                            counters.changes.fetch_add(n as u64, Ordering::Relaxed);
                            let ids: Vec<String> = egress
                                .enforced()
                                .iter()
                                .map(|(t, w)| {
                                    format!("{t}{}", if w.active { "" } else { " (demoted)" })
                                })
                                .collect();
                            tracing::info!("enforcing tunnels [{}]", ids.join(", "));
                        }
                        Err(e) => {
                            counters.apply_errors.fetch_add(1, Ordering::Relaxed);
                            tracing::error!("{e}");
                        }
                    }
                    let active = egress.enforced().values().filter(|w| w.active).count() as u64;
                    counters.active.store(active, Ordering::Relaxed);
                    counters
                        .demoted
                        .store(egress.enforced().len() as u64 - active, Ordering::Relaxed);
                }
                Err(e) => {
                    // The next poll looks for the serving replica again.
                    tracing::warn!("controller {}: {e}", c.peer_addr());
                    counters.poll_errors.fetch_add(1, Ordering::Relaxed);
                    client = None;
                }
            }
        }
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let marked = egress.marked().unwrap_or_default();
    let enforced = egress.enforced().len();
    egress.restore()?;
    let get = |x: &AtomicU64| x.load(Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({
            "event": "stopped",
            "polls": get(&counters.polls),
            "poll_errors": get(&counters.poll_errors),
            "apply_errors": get(&counters.apply_errors),
            "changes": get(&counters.changes),
            "tunnels": enforced,
            "marked_packets": marked,
            "restored": a.iface,
        })
    );
    Ok(())
}
