//! One-way UDP latency probes between emulated hosts.
//!
//! The sender writes its `CLOCK_REALTIME` send time into each probe; the
//! receiver asks the kernel for a software receive timestamp
//! (`SO_TIMESTAMPING`, `SOF_TIMESTAMPING_RX_SOFTWARE`, also `CLOCK_REALTIME`,
//! taken when the packet enters the receiving host's stack). Both ends run
//! on the same machine, so one clock serves both and the difference is the
//! one-way latency: sender syscall, host NIC qdisc, veth, bridge, switch
//! port qdisc, veth, receive stack up to the timestamp point.

use crate::error::TestbedError;
// Also reachable as `probe::PathMeasurement`.
pub use crate::measurement::PathMeasurement;
use crate::netns::in_netns;
use crate::state::HostInfo;
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, TimestampingFlag,
};
use std::io::IoSliceMut;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Probe payload: seq (8) + class (1) + send time ns (8), padded.
const PROBE_LEN: usize = 64;

/// Now on `CLOCK_REALTIME`, nanoseconds since the epoch.
pub fn realtime_ns() -> i128 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

fn sock_err(what: &str, host: &HostInfo, e: std::io::Error) -> TestbedError {
    TestbedError::io(format!("{what} in {}", host.netns), e)
}

/// A UDP socket in `host`'s namespace bound to its address (port chosen by
/// the kernel), with software RX timestamps on.
pub(crate) fn rx_socket(host: &HostInfo, timeout: Duration) -> Result<UdpSocket, TestbedError> {
    let s = in_netns(&host.netns, || {
        UdpSocket::bind(SocketAddrV4::new(host.addr, 0))
    })?
    .map_err(|e| sock_err("bind probe receiver", host, e))?;
    let flags = TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
        | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
    setsockopt(&s, sockopt::Timestamping, &flags)
        .map_err(|e| sock_err("SO_TIMESTAMPING", host, e.into()))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| sock_err("SO_RCVTIMEO", host, e))?;
    Ok(s)
}

/// A UDP socket in `host`'s namespace connected to `to`, sending with `tos`.
pub(crate) fn tx_socket(
    host: &HostInfo,
    to: SocketAddrV4,
    tos: u8,
) -> Result<UdpSocket, TestbedError> {
    let s = in_netns(&host.netns, || {
        UdpSocket::bind(SocketAddrV4::new(host.addr, 0))
    })?
    .map_err(|e| sock_err("bind probe sender", host, e))?;
    socket2::SockRef::from(&s)
        .set_tos(tos as u32)
        .map_err(|e| sock_err("IP_TOS", host, e))?;
    s.connect(to).map_err(|e| sock_err("connect", host, e))?;
    Ok(s)
}

/// Receive one datagram and its software RX timestamp (ns, realtime).
/// Timeouts come back as `WouldBlock`/`TimedOut` errors.
pub(crate) fn recv_stamped(
    s: &UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<i128>)> {
    let mut cmsg = nix::cmsg_space!(nix::sys::socket::Timestamps);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(s.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::empty())
        .map_err(std::io::Error::from)?;
    let mut stamp = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestampsns(ts) = c {
                let t = ts.system;
                if t.tv_sec() != 0 || t.tv_nsec() != 0 {
                    stamp = Some(t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128);
                }
            }
        }
    }
    Ok((msg.bytes, stamp))
}

/// Send probes until one arrives with an RX timestamp (at most `limit`).
///
/// The kernel turns receive timestamping on lazily: the first socket that
/// asks for it schedules a work item that flips a global switch, and
/// packets received before that carry no timestamp. So every measurement
/// starts by waiting for a stamped packet.
pub(crate) fn wait_for_stamps(
    tx: &UdpSocket,
    rx: &UdpSocket,
    limit: Duration,
) -> std::io::Result<bool> {
    let deadline = Instant::now() + limit;
    let mut out = [0u8; PROBE_LEN];
    let mut inb = [0u8; 256];
    while Instant::now() < deadline {
        encode(&mut out, u64::MAX, 0, realtime_ns());
        tx.send(&out)?;
        loop {
            match recv_stamped(rx, &mut inb) {
                Ok((n, stamp)) => {
                    if decode(&inb[..n]).map(|d| d.0) == Some(u64::MAX) && stamp.is_some() {
                        return Ok(true);
                    }
                }
                Err(e) if is_timeout(&e) => break,
                Err(e) => return Err(e),
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(false)
}

/// A receive that ended without data (timeout, would block, signal).
pub(crate) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

fn no_stamps(src: &HostInfo, dst: &HostInfo) -> TestbedError {
    TestbedError::Thread(format!(
        "no RX software timestamps on probes h{} -> h{} (SO_TIMESTAMPING unsupported?)",
        src.index, dst.index
    ))
}

fn encode(buf: &mut [u8; PROBE_LEN], seq: u64, class: u8, tx_ns: i128) {
    buf[0..8].copy_from_slice(&seq.to_le_bytes());
    buf[8] = class;
    buf[9..25].copy_from_slice(&tx_ns.to_le_bytes());
}

/// The one-way latency of a probe sent at `t_tx` and stamped at `t_rx`
/// (realtime ns). `None` when the stamp comes first (the realtime clock
/// stepped between the two) or the send time is garbled: there is no
/// latency to tell, and 0 would claim one.
fn one_way_ns(t_tx: i128, t_rx: i128) -> Option<u64> {
    u64::try_from(t_rx.checked_sub(t_tx)?).ok()
}

fn decode(buf: &[u8]) -> Option<(u64, u8, i128)> {
    if buf.len() < 25 {
        return None;
    }
    let seq = u64::from_le_bytes(buf[0..8].try_into().ok()?);
    let tx = i128::from_le_bytes(buf[9..25].try_into().ok()?);
    Some((seq, buf[8], tx))
}

/// Value at quantile `q` (0..=1) of sorted samples, nearest rank.
pub fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    // len >= 1: the empty case returned above.
    Some(sorted[rank.saturating_sub(1).min(sorted.len() - 1)])
}

/// Send `probes` probes from `src` to `dst` one at a time (the next leaves
/// only after the previous one arrived, so they never queue behind each
/// other), all from the calling thread.
pub fn measure_path_idle(
    src: &HostInfo,
    dst: &HostInfo,
    probes: usize,
    tos: u8,
) -> Result<PathMeasurement, TestbedError> {
    const WARMUP: usize = 16;
    let rx = rx_socket(dst, Duration::from_millis(50))?;
    let port = rx
        .local_addr()
        .map_err(|e| sock_err("local_addr", dst, e))?
        .port();
    let tx = tx_socket(src, SocketAddrV4::new(dst.addr, port), tos)?;
    rx.set_read_timeout(Some(Duration::from_millis(2)))
        .map_err(|e| sock_err("SO_RCVTIMEO", dst, e))?;
    if !wait_for_stamps(&tx, &rx, Duration::from_secs(2))
        .map_err(|e| sock_err("warm-up", dst, e))?
    {
        return Err(no_stamps(src, dst));
    }
    rx.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| sock_err("SO_RCVTIMEO", dst, e))?;
    let mut out = [0u8; PROBE_LEN];
    let mut inb = [0u8; 256];
    let mut samples = Vec::with_capacity(probes);
    let mut no_stamp = 0usize;
    let mut backwards = 0usize;
    for seq in 0..(WARMUP + probes) as u64 {
        let t0 = realtime_ns();
        encode(&mut out, seq, 0, t0);
        tx.send(&out).map_err(|e| sock_err("send probe", src, e))?;
        // Read until this probe arrives or the wait times out (lost).
        loop {
            match recv_stamped(&rx, &mut inb) {
                Ok((n, stamp)) => {
                    let Some((s, _, t_tx)) = decode(&inb[..n]) else {
                        continue;
                    };
                    if s != seq {
                        continue;
                    }
                    match stamp {
                        Some(t_rx) if seq >= WARMUP as u64 => match one_way_ns(t_tx, t_rx) {
                            Some(ns) => samples.push(ns),
                            None => backwards += 1,
                        },
                        None => no_stamp += 1,
                        _ => {}
                    }
                    break;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(sock_err("receive probe", dst, e)),
            }
        }
    }
    if samples.is_empty() {
        return Err(TestbedError::Thread(format!(
            "no probe from h{} reached h{} with a timestamp ({no_stamp} without, \
             {backwards} stamped before they were sent)",
            src.index, dst.index
        )));
    }
    samples.sort_unstable();
    Ok(PathMeasurement {
        from: src.index,
        to: dst.index,
        sent: probes,
        received: samples.len(),
        // Not empty (returned above), so these exist.
        min_ns: samples[0],
        p50_ns: quantile(&samples, 0.5).unwrap_or(0),
        p999_ns: quantile(&samples, 0.999).unwrap_or(0),
        max_ns: samples[samples.len() - 1],
    })
}

/// An open-loop probe run: `count` probes at a fixed `interval`, cycling
/// through the `tos` values (so the classes are interleaved and see the
/// same conditions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Sending host index.
    pub from: usize,
    /// Receiving host index.
    pub to: usize,
    /// TOS bytes to cycle through (e.g. `[0xb8, 0x00]`); at most 255.
    pub tos: Vec<u8>,
    /// Total probes (all classes).
    pub count: usize,
    /// Time between consecutive probes.
    pub interval: Duration,
    /// How long to wait for stragglers after the last probe.
    pub timeout: Duration,
}

/// One-way latencies of one TOS class in a probe run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassSamples {
    /// The TOS byte.
    pub tos: u8,
    /// Probes sent in this class.
    pub sent: usize,
    /// One-way latencies of the probes received, ns, sorted.
    pub one_way_ns: Vec<u64>,
    /// Probes received with a stamp before their send time (the realtime
    /// clock stepped between the two): no latency, so not in `one_way_ns`,
    /// and not lost either.
    pub backwards: usize,
}

impl ClassSamples {
    /// Probes not received. Saturating: a probe counted in another class
    /// (a garbled class byte) could make the received exceed the sent.
    pub fn lost(&self) -> usize {
        self.sent
            .saturating_sub(self.one_way_ns.len())
            .saturating_sub(self.backwards)
    }
    /// Quantile of the received latencies (see [`quantile`]).
    pub fn quantile(&self, q: f64) -> Option<u64> {
        quantile(&self.one_way_ns, q)
    }
}

/// Result of a probe run: one entry per TOS value, in spec order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResult {
    /// Per class.
    pub classes: Vec<ClassSamples>,
}

/// Run an open-loop probe (see [`ProbeSpec`]) between two hosts: a
/// receiver thread collects, the calling thread sends.
pub fn run_probe(
    src: &HostInfo,
    dst: &HostInfo,
    spec: &ProbeSpec,
) -> Result<ProbeResult, TestbedError> {
    if spec.tos.is_empty() || spec.tos.len() > 255 {
        return Err(TestbedError::Invalid(
            "probe needs 1..=255 TOS values".into(),
        ));
    }
    let rx = rx_socket(dst, Duration::from_millis(20))?;
    let port = rx
        .local_addr()
        .map_err(|e| sock_err("local_addr", dst, e))?
        .port();
    let to = SocketAddrV4::new(dst.addr, port);
    let txs = spec
        .tos
        .iter()
        .map(|&t| tx_socket(src, to, t))
        .collect::<Result<Vec<_>, _>>()?;
    if !wait_for_stamps(&txs[0], &rx, Duration::from_secs(2))
        .map_err(|e| sock_err("warm-up", dst, e))?
    {
        return Err(no_stamps(src, dst));
    }
    let done = Arc::new(AtomicBool::new(false));
    let done_rx = done.clone();
    let count = spec.count;
    let receiver = std::thread::Builder::new()
        .name("xl-probe-rx".into())
        .spawn(move || -> std::io::Result<Vec<(u8, Option<u64>)>> {
            let mut got = Vec::with_capacity(count);
            let mut seen = vec![false; count];
            let mut buf = [0u8; 256];
            while got.len() < count {
                match recv_stamped(&rx, &mut buf) {
                    Ok((n, Some(t_rx))) => {
                        if let Some((seq, class, t_tx)) = decode(&buf[..n]) {
                            let i = seq as usize;
                            if i < count && !seen[i] {
                                seen[i] = true;
                                got.push((class, one_way_ns(t_tx, t_rx)));
                            }
                        }
                    }
                    Ok((_, None)) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock
                                | std::io::ErrorKind::TimedOut
                                | std::io::ErrorKind::Interrupted
                        ) =>
                    {
                        if done_rx.load(Ordering::Acquire) {
                            break;
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(got)
        })
        .map_err(|e| TestbedError::io("spawn probe receiver", e))?;
    let mut sent = vec![0usize; spec.tos.len()];
    let mut buf = [0u8; PROBE_LEN];
    let start = Instant::now();
    let mut send_err = None;
    for seq in 0..spec.count {
        let due = u32::try_from(seq)
            .ok()
            .and_then(|k| spec.interval.checked_mul(k))
            .and_then(|d| start.checked_add(d));
        let now = Instant::now();
        if let Some(due) = due.filter(|d| *d > now) {
            std::thread::sleep(due - now);
        }
        let class = seq % spec.tos.len();
        encode(&mut buf, seq as u64, class as u8, realtime_ns());
        match txs[class].send(&buf) {
            Ok(_) => sent[class] += 1,
            // A full queue may refuse a probe: that is a loss, not an error.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => sent[class] += 1,
            Err(e) => {
                send_err = Some(sock_err("send probe", src, e));
                break;
            }
        }
    }
    std::thread::sleep(spec.timeout);
    done.store(true, Ordering::Release);
    let got = receiver
        .join()
        .map_err(|_| TestbedError::Thread("probe receiver panicked".into()))?
        .map_err(|e| sock_err("receive probe", dst, e))?;
    if let Some(e) = send_err {
        return Err(e);
    }
    let mut classes: Vec<ClassSamples> = spec
        .tos
        .iter()
        .zip(sent)
        .map(|(&tos, sent)| ClassSamples {
            tos,
            sent,
            one_way_ns: Vec::new(),
            backwards: 0,
        })
        .collect();
    for (class, ns) in got {
        if let Some(c) = classes.get_mut(class as usize) {
            match ns {
                Some(ns) => c.one_way_ns.push(ns),
                None => c.backwards += 1,
            }
        }
    }
    for c in &mut classes {
        c.one_way_ns.sort_unstable();
    }
    Ok(ProbeResult { classes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_nearest_rank() {
        let v: Vec<u64> = (1..=1000).collect();
        let table = [(0.0, 1), (0.5, 500), (0.999, 999), (1.0, 1000), (2.0, 1000)];
        for (q, want) in table {
            assert_eq!(quantile(&v, q), Some(want), "q={q}");
        }
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[7], 0.999), Some(7));
    }

    #[test]
    fn payload_round_trip() {
        let mut b = [0u8; PROBE_LEN];
        encode(&mut b, 42, 3, 1_700_000_000_123_456_789);
        assert_eq!(decode(&b), Some((42, 3, 1_700_000_000_123_456_789)));
        assert_eq!(decode(&b[..10]), None);
    }

    #[test]
    fn loopback_stamps_work() {
        // The timestamp path itself, on loopback in the current namespace.
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let flags = TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
        setsockopt(&rx, sockopt::Timestamping, &flags).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
        assert!(wait_for_stamps(&tx, &rx, Duration::from_secs(2)).unwrap());
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let t0 = realtime_ns();
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 16];
        let (n, stamp) = recv_stamped(&rx, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        let stamp = stamp.expect("software rx timestamp");
        assert!(stamp >= t0, "rx stamp {stamp} before send {t0}");
    }

    #[test]
    fn one_way_latencies() {
        let table = [
            (1_000, 1_500, Some(500)),
            (1_000, 1_000, Some(0)),
            (1_000, 999, None),         // stamped before it was sent
            (i128::MIN, 1_000, None),   // garbled send time: overflow
            (-(1i128 << 100), 0, None), // beyond u64
            (0, i128::MIN, None),
        ];
        for (tx, rx, want) in table {
            assert_eq!(one_way_ns(tx, rx), want, "{tx} -> {rx}");
        }
    }

    #[test]
    fn degenerate_classes() {
        // (sent, latencies, stamped backwards, lost, p50)
        type Case = (usize, &'static [u64], usize, usize, Option<u64>);
        let table: &[Case] = &[
            (0, &[], 0, 0, None),
            (10, &[], 0, 10, None),
            (10, &[], 10, 0, None),
            (10, &[5], 2, 7, Some(5)),
            (1, &[5, 6], 0, 0, Some(5)),
        ];
        for &(sent, ns, backwards, lost, p50) in table {
            let c = ClassSamples {
                tos: 0,
                sent,
                one_way_ns: ns.to_vec(),
                backwards,
            };
            assert_eq!(c.lost(), lost, "{c:?}");
            assert_eq!(c.quantile(0.5), p50, "{c:?}");
            assert_eq!(c.quantile(0.0), ns.first().copied(), "{c:?}");
            assert_eq!(c.quantile(1.0), ns.last().copied(), "{c:?}");
        }
    }
}
