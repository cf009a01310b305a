//! Cross-check with a real tool: `sockperf ping-pong` and lancet measure the
//! same `sockperf server` on 127.0.0.1 with the same message size (64 B) and
//! rate (1000/s, fixed spacing); their p50 and p99 round trips must agree
//! within 20 %.
//!
//! Setup, and why (measured on the 2-vCPU Firecracker VM this is built on):
//!
//! - **Fixed placement.** The server runs on the last CPU, both clients on
//!   CPU 0. A round trip between vCPUs includes the hypervisor waking the
//!   other vCPU; where the scheduler happens to put the threads changed
//!   sockperf's own p50 from 17 µs to 63 µs between consecutive runs.
//! - **Both clients poll.** sockperf paces its sends by spinning, and with
//!   `--nonblocked` it also spins on `recvfrom` for the reply; lancet runs
//!   with `--spin-us 1000` (its whole inter-send gap), so its agent never
//!   sleeps either. A client that sleeps pays a vCPU wake-up (≈ 10 µs here)
//!   on every reply, which is a property of the client, not of the path.
//! - **A vCPU that does not halt.** A `SCHED_IDLE` thread spins on the
//!   server's CPU (it runs only when nothing else wants that CPU). Without
//!   it, whether the server's vCPU had halted between requests — which
//!   depends on whatever else the machine runs at that moment — switched
//!   whole 1 s rounds of either tool between ≈ 23 µs and ≈ 44 µs.
//! - **A real-time server.** `sockperf server` runs under `chrt -f 10`
//!   (it blocks between requests, so it uses little CPU): other work on the
//!   machine then cannot stall it for milliseconds. Such stalls hit the two
//!   tools differently — sockperf is closed-loop (one late request per
//!   stall), lancet open-loop (every request scheduled during the stall) —
//!   and would compare their scheduling models rather than their clocks.
//! - **Turns, not together.** Run at once, the clients compete for CPU 0.
//!   They take turns in short rounds (16 × 1 s each), which also cancels slow
//!   drift of the machine; each tool's observations are pooled over its
//!   rounds (sockperf's from its `--full-log`) and one percentile is taken
//!   over the pool (never an average of percentiles). sockperf's own
//!   percentile lines are parsed per round and printed.
//!
//! sockperf times a round trip in user space, from before its send call to
//! after its receive call; lancet's comparable figure is `user_rtt_ns` (the
//! same two points), printed beside its kernel-stamped latency. sockperf
//! does no thinning, so lancet's pool is all its post-warm-up samples.
//!
//! Needs the Debian package `sockperf` (scripts/test.sh installs it), and
//! `taskset`/`chrt` (util-linux). Without sockperf this test fails, on
//! purpose: it must not pass silently.
//!
//! The commands of one round (LAST = the last CPU, PORT chosen at run time):
//!
//! ```text
//! taskset -c LAST chrt -f 10 sockperf server -i 127.0.0.1 -p PORT
//! taskset -c 0 sockperf ping-pong -i 127.0.0.1 -p PORT -m 64 --mps 1000 -t 1 \
//!     --nonblocked --full-rtt --full-log FILE
//! taskset -c 0 xlane lancet --target 127.0.0.1:PORT --app sockperf --size 64 \
//!     --rate 1000 --dist fixed --spin-us 1000 --duration 1 --max-duration 1 \
//!     --percentiles 50,99
//! ```

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xlane_lancet::report::fmt_ns;
use xlane_lancet::{sockperf, App, Arrival, ClientConfig};
use xlane_stats::percentile;

const SIZE: usize = 64;
const RATE: u32 = 1000;
const SECONDS: u64 = 1;
const ROUNDS: usize = 16;
/// Comparisons made before the test gives up (it passes on the first that agrees).
const ATTEMPTS: usize = 3;
/// The clients' CPU.
const CLIENT_CPU: usize = 0;
const TOLERANCE: f64 = 0.20;

/// Kills the child (by its own PID) when dropped, also on a failed assert.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `SCHED_IDLE` thread spinning on the server's CPU for as long as this
/// lives: the vCPU then never halts between requests (the effect of booting
/// with `idle=poll`), and a request never waits for the hypervisor to wake
/// it. It runs only when nothing else wants that CPU, so it delays nobody.
struct IdleSpinner {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IdleSpinner {
    fn start(cpu: usize) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            pin_current_thread(cpu);
            let p = libc::sched_param { sched_priority: 0 };
            // SAFETY: pid 0 is this thread; p is valid.
            let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) };
            assert_eq!(r, 0, "SCHED_IDLE: {}", std::io::Error::last_os_error());
            while !s2.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        IdleSpinner {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for IdleSpinner {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Removes the file when dropped.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn sockperf_installed() -> bool {
    Command::new("sockperf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// The server's CPU: the last one (computed once: after pinning,
/// `available_parallelism` would see one CPU).
fn server_cpu() -> usize {
    static CPU: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPU.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()) - 1)
}

/// Pin the calling thread (and the threads it starts from now on) to `cpu`.
fn pin_current_thread(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it;
    // sched_setaffinity(0, ..) applies to the calling thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(
        r,
        0,
        "sched_setaffinity to CPU {cpu}: {}",
        std::io::Error::last_os_error()
    );
}

fn free_udp_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind an ephemeral UDP port");
    s.local_addr().expect("local addr").port()
}

/// Wait until the sockperf server answers one request of ours.
fn wait_for_server(port: u16) {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let mut req = vec![0u8; SIZE];
    App::Sockperf.write_template(&mut req).expect("template");
    App::Sockperf.set_id(&mut req, 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 256];
    while Instant::now() < deadline {
        let _ = s.send_to(&req, ("127.0.0.1", port));
        if let Ok((n, _)) = s.recv_from(&mut buf) {
            if App::Sockperf.parse_response(&buf[..n], SIZE).is_ok() {
                return;
            }
        }
    }
    panic!("sockperf server on 127.0.0.1:{port} did not answer within 5 s");
}

/// One sockperf ping-pong round: its parsed summary and its observations.
fn sockperf_round(port: u16, round: usize) -> (sockperf::SockperfResult, Vec<f64>) {
    let log = TempFile(std::env::temp_dir().join(format!(
        "xlane-lancet-sockperf-{}-{round}.csv",
        std::process::id()
    )));
    let out = Command::new("taskset")
        .args(["-c", &CLIENT_CPU.to_string(), "sockperf"])
        .args(["ping-pong", "-i", "127.0.0.1", "-p", &port.to_string()])
        .args(["-m", &SIZE.to_string(), "--mps", &RATE.to_string()])
        .args([
            "-t",
            &SECONDS.to_string(),
            "--nonblocked",
            "--full-rtt",
            "--full-log",
        ])
        .arg(&log.0)
        .output()
        .expect("run sockperf ping-pong");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "sockperf ping-pong failed:\n{text}");
    let summary = sockperf::parse(&text).unwrap_or_else(|e| panic!("{e}; output:\n{text}"));
    let full = std::fs::read_to_string(&log.0).expect("read sockperf's --full-log");
    let rtts = sockperf::parse_full_log(&full);
    assert!(
        rtts.len() as f64 > 0.2 * (RATE as f64) * SECONDS as f64,
        "sockperf logged only {} observations",
        rtts.len()
    );
    (summary, rtts)
}

/// On this shared VM a busy moment of the machine (the hypervisor taking
/// the server's vCPU for tens of µs, another process waking) lands in one
/// tool's rounds and not the other's, and the p99 of a pool of a few
/// thousand round trips follows such moments: per-round p99s of either tool
/// range from 20 µs to 150 µs within one run. Sixteen alternating rounds
/// spread those moments over both tools; a comparison that still disagrees
/// is printed and made again, up to three times. A real disagreement —
/// lancet timing other points than sockperf, counting think time, or
/// dropping slow replies — shows in every attempt and fails the test.
#[test]
fn lancet_agrees_with_sockperf_ping_pong() {
    let mut failures = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let bad = compare_once();
        if bad.is_empty() {
            return;
        }
        println!(
            "attempt {attempt} disagreed ({}); measuring again",
            bad.join("; ")
        );
        failures.push(bad.join("; "));
    }
    panic!(
        "lancet and sockperf disagree by more than {:.0} % in all {ATTEMPTS} attempts: {}",
        TOLERANCE * 100.0,
        failures.join(" / ")
    );
}

/// One full comparison; the percentiles that disagree (empty: agreement).
fn compare_once() -> Vec<String> {
    assert!(
        server_cpu() > CLIENT_CPU,
        "this test needs two CPUs (server and clients apart)"
    );
    assert!(
        sockperf_installed(),
        "sockperf is not installed: run `bash scripts/test.sh` (it installs the Debian package \
         `sockperf`), or `apt-get install sockperf`"
    );
    let port = free_udp_port();
    let server = Killed(
        Command::new("taskset")
            .args([
                "-c",
                &server_cpu().to_string(),
                "chrt",
                "-f",
                "10",
                "sockperf",
            ])
            .args(["server", "-i", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sockperf server"),
    );
    wait_for_server(port);
    let spinner = IdleSpinner::start(server_cpu());
    pin_current_thread(CLIENT_CPU);

    let mut cfg = ClientConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    cfg.app = App::Sockperf;
    cfg.size = SIZE;
    cfg.rate = RATE as f64;
    cfg.arrival = Arrival::Fixed;
    cfg.duration_ns = SECONDS * 1_000_000_000;
    cfg.max_duration_ns = cfg.duration_ns;
    cfg.percentiles = vec![50.0, 99.0];
    // Poll for the whole gap between sends, as sockperf does.
    cfg.spin_ns = 1_000_000_000 / RATE as u64;

    let (mut sp_pool, mut user, mut kern) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (summary, rtts) = sockperf_round(port, round);
        println!(
            "round {round}: sockperf prints p50 {} p99 {} ({} observations, {} logged)",
            summary.at(50.0).map_or("-".into(), |v| fmt_ns(v as u64)),
            summary.at(99.0).map_or("-".into(), |v| fmt_ns(v as u64)),
            summary.observations.unwrap_or(0),
            rtts.len()
        );
        sp_pool.extend(rtts.iter().map(|&v| v.round() as u64));
        cfg.seed = round as u64 + 1;
        let (rep, samples) = xlane_lancet::run_with_samples(&cfg).expect("lancet run");
        assert_eq!(rep.counts.lost, 0, "lancet lost requests: {:?}", rep.counts);
        if round == ROUNDS - 1 {
            println!("{}", rep.render());
        }
        let mut u: Vec<u64> = samples.iter().map(|s| s.user_rtt_ns as u64).collect();
        u.sort_unstable();
        println!(
            "round {round}: lancet user rtt p50 {} p99 {} ({} samples)",
            fmt_ns(percentile(&u, 0.5).unwrap_or(0)),
            fmt_ns(percentile(&u, 0.99).unwrap_or(0)),
            u.len()
        );
        user.extend_from_slice(&u);
        kern.extend(samples.iter().map(|s| s.latency_ns));
    }
    drop(spinner);
    drop(server);
    for v in [&mut sp_pool, &mut user, &mut kern] {
        v.sort_unstable();
    }

    println!(
        "\nround trip, 127.0.0.1, {SIZE} B at {RATE}/s, {ROUNDS} alternating rounds of {SECONDS} s, \
         clients on CPU {CLIENT_CPU}, server on CPU {}: \
         sockperf ({} observations) vs lancet user rtt ({} samples)",
        server_cpu(),
        sp_pool.len(),
        user.len()
    );
    let mut bad = Vec::new();
    for p in [50.0, 99.0] {
        let q = p / 100.0;
        let s = percentile(&sp_pool, q).expect("sockperf observations") as f64;
        let l = percentile(&user, q).expect("lancet samples") as f64;
        let k = percentile(&kern, q).expect("lancet samples");
        let ratio = l / s;
        println!(
            "  p{p:<4} sockperf {:>9}  lancet user rtt {:>9}  ratio {ratio:.3}   (lancet kernel-stamped latency {})",
            fmt_ns(s as u64),
            fmt_ns(l as u64),
            fmt_ns(k)
        );
        if (ratio - 1.0).abs() > TOLERANCE {
            bad.push(format!("p{p}: lancet {l:.0} ns vs sockperf {s:.0} ns"));
        }
    }
    bad
}
