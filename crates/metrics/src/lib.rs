//! # xlane-metrics: Prometheus text exposition for the daemons
//!
//! A daemon run with `--metrics ADDR` serves `GET /metrics` in the
//! Prometheus text format (version 0.0.4) on a thread of its own
//! ([`Exporter`]): each scrape calls the daemon's collector, which reads
//! the counters the daemon already keeps (atomics, its shared-memory
//! table) and returns [`Family`]s. Names follow Prometheus conventions:
//! `xlane_<daemon>_<what>_total` for counters, base units (`_seconds`,
//! `_bytes`) for the rest.
//!
//! The HTTP side is the least a scraper needs: one request per
//! connection, its request line checked ([`parse_request`]; fuzz target
//! `metrics_request`), `200` for `GET /metrics`, `404` for another path,
//! `405` for another method, `400` for anything else; at most
//! [`MAX_REQUEST`] bytes read, with a one-second timeout.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Most bytes of a request read.
pub const MAX_REQUEST: usize = 4096;

/// Counter, gauge or histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (name ends in `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Cumulative buckets, a sum and a count (see [`Histogram`]).
    Histogram,
}

/// One metric family: its samples, each with its labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The name.
    pub name: String,
    /// One line of help.
    pub help: String,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// `(name suffix, labels, value)` per sample: the suffix is empty but
    /// for a histogram's `_bucket`, `_sum` and `_count`.
    pub samples: Vec<Sample>,
}

/// One sample of a family: `(name suffix, labels, value)`.
pub type Sample = (&'static str, Labels, f64);

/// A sample's `(label, value)` pairs.
pub type Labels = Vec<(String, String)>;

/// A histogram of durations that a real-time thread can fill: fixed
/// bucket bounds, one atomic counter per bucket, no allocation and at most
/// one pass over the bounds per [`Histogram::observe_ns`].
#[derive(Debug)]
pub struct Histogram {
    bounds_ns: &'static [u64],
    /// One per bound, then the `+Inf` bucket.
    counts: Vec<std::sync::atomic::AtomicU64>,
    sum_ns: std::sync::atomic::AtomicU64,
}

/// Bucket bounds for latencies from microseconds to a second, ns.
pub const LATENCY_BOUNDS_NS: &[u64] = &[
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    1_000_000_000,
];

impl Histogram {
    /// An empty histogram over increasing `bounds_ns`.
    pub fn new(bounds_ns: &'static [u64]) -> Histogram {
        debug_assert!(bounds_ns.windows(2).all(|w| w[0] < w[1]));
        Histogram {
            bounds_ns,
            counts: (0..=bounds_ns.len())
                .map(|_| std::sync::atomic::AtomicU64::new(0))
                .collect(),
            sum_ns: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Count one duration.
    pub fn observe_ns(&self, ns: u64) {
        let i = self.bounds_ns.partition_point(|&b| b < ns);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

impl Family {
    /// A histogram family in seconds (`name` should end in `_seconds`).
    pub fn histogram(name: &str, help: &str, h: &Histogram) -> Family {
        let mut samples = Vec::with_capacity(h.counts.len() + 2);
        let mut cum = 0u64;
        for (i, c) in h.counts.iter().enumerate() {
            cum += c.load(Ordering::Relaxed);
            let le = match h.bounds_ns.get(i) {
                Some(b) => number(*b as f64 / 1e9),
                None => "+Inf".into(),
            };
            samples.push(("_bucket", vec![("le".to_string(), le)], cum as f64));
        }
        let sum = h.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        samples.push(("_sum", Vec::new(), sum));
        samples.push(("_count", Vec::new(), cum as f64));
        Family {
            name: name.into(),
            help: help.into(),
            kind: Kind::Histogram,
            samples,
        }
    }
}

impl Family {
    /// A family of one unlabelled sample.
    pub fn one(name: &str, help: &str, kind: Kind, value: f64) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind,
            samples: vec![("", Vec::new(), value)],
        }
    }

    /// A family of one sample per `(label value, value)`, under `label`.
    pub fn by(name: &str, help: &str, kind: Kind, label: &str, values: &[(&str, f64)]) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind,
            samples: values
                .iter()
                .map(|(l, v)| ("", vec![(label.to_string(), l.to_string())], *v))
                .collect(),
        }
    }
}

fn escape(s: &str, quotes: bool) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '"' if quotes => o.push_str("\\\""),
            c => o.push(c),
        }
    }
    o
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The families in the text format.
pub fn render(families: &[Family]) -> String {
    let mut s = String::new();
    for f in families {
        s += &format!("# HELP {} {}\n", f.name, escape(&f.help, false));
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        s += &format!("# TYPE {} {kind}\n", f.name);
        for (suffix, labels, v) in &f.samples {
            s += &f.name;
            s += suffix;
            if !labels.is_empty() {
                let l: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v, true)))
                    .collect();
                s += &format!("{{{}}}", l.join(","));
            }
            s += &format!(" {}\n", number(*v));
        }
    }
    s
}

/// What a request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// `GET /metrics`.
    Metrics,
    /// `GET` of another path.
    NotFound,
    /// Another method.
    Method,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// No complete request line.
    #[error("no request line")]
    Incomplete,
    /// Not `METHOD PATH HTTP/x.y`.
    #[error("malformed request line")]
    Malformed,
}

/// Reads the request line of `bytes` (the start of an HTTP/1.x request).
pub fn parse_request(bytes: &[u8]) -> Result<Request, HttpError> {
    let end = bytes
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(HttpError::Incomplete)?;
    let line = std::str::from_utf8(&bytes[..end]).map_err(|_| HttpError::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::Malformed);
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Err(HttpError::Malformed);
    }
    if method != "GET" {
        return Ok(Request::Method);
    }
    let path = target.split('?').next().unwrap_or(target);
    Ok(if path == "/metrics" {
        Request::Metrics
    } else {
        Request::NotFound
    })
}

/// The collector a scrape calls.
pub type Collect = dyn Fn() -> Vec<Family> + Send + Sync;

/// A running `/metrics` endpoint; stops when dropped.
pub struct Exporter {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Listens on `addr` and serves `collect`'s families at `/metrics`.
    pub fn serve(addr: SocketAddr, collect: Arc<Collect>) -> std::io::Result<Exporter> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            let _ = answer(s, &*collect);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?;
        Ok(Exporter {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(mut s: TcpStream, collect: &Collect) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(1)))?;
    s.set_write_timeout(Some(Duration::from_secs(1)))?;
    let mut buf = [0u8; MAX_REQUEST];
    let mut n = 0;
    let req = loop {
        let r = parse_request(&buf[..n]);
        if r != Err(HttpError::Incomplete) || n == buf.len() {
            break r;
        }
        match s.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break parse_request(&buf[..n]),
            Ok(k) => n += k,
        }
    };
    let (status, body) = match req {
        Ok(Request::Metrics) => ("200 OK", render(&collect())),
        Ok(Request::NotFound) => ("404 Not Found", "only /metrics is served\n".into()),
        Ok(Request::Method) => ("405 Method Not Allowed", "GET only\n".into()),
        Err(e) => ("400 Bad Request", format!("{e}\n")),
    };
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format() {
        let f = [
            Family::one("xlane_x_total", "Things.", Kind::Counter, 3.0),
            Family::by(
                "xlane_peers",
                "Peers by status, \"quoted\"\nand a line.",
                Kind::Gauge,
                "status",
                &[("alive", 2.0), ("a\"b\\c", 0.5)],
            ),
        ];
        assert_eq!(
            render(&f),
            "# HELP xlane_x_total Things.\n# TYPE xlane_x_total counter\nxlane_x_total 3\n\
             # HELP xlane_peers Peers by status, \"quoted\"\\nand a line.\n# TYPE xlane_peers gauge\n\
             xlane_peers{status=\"alive\"} 2\nxlane_peers{status=\"a\\\"b\\\\c\"} 0.5\n"
        );
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(1e20), "100000000000000000000");
    }

    #[test]
    fn histograms_are_cumulative_in_seconds() {
        const B: &[u64] = &[1_000, 10_000];
        let h = Histogram::new(B);
        for ns in [500, 1_000, 1_001, 9_999, 20_000] {
            h.observe_ns(ns);
        }
        assert_eq!(h.count(), 5);
        assert_eq!(
            render(&[Family::histogram("xlane_d_seconds", "D.", &h)]),
            "# HELP xlane_d_seconds D.\n# TYPE xlane_d_seconds histogram\n\
             xlane_d_seconds_bucket{le=\"0.000001\"} 2\n\
             xlane_d_seconds_bucket{le=\"0.00001\"} 4\n\
             xlane_d_seconds_bucket{le=\"+Inf\"} 5\n\
             xlane_d_seconds_sum 0.0000325\nxlane_d_seconds_count 5\n"
        );
    }

    #[test]
    fn request_lines_table() {
        let rows: &[(&[u8], Result<Request, HttpError>)] = &[
            (
                b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
                Ok(Request::Metrics),
            ),
            (b"GET /metrics?x=1 HTTP/1.0\r\n", Ok(Request::Metrics)),
            (b"GET / HTTP/1.1\r\n", Ok(Request::NotFound)),
            (b"POST /metrics HTTP/1.1\r\n", Ok(Request::Method)),
            (b"GET /metrics HTTP/1.1", Err(HttpError::Incomplete)),
            (b"", Err(HttpError::Incomplete)),
            (b"GET /metrics\r\n", Err(HttpError::Malformed)),
            (b"GET metrics HTTP/1.1\r\n", Err(HttpError::Malformed)),
            (b"GET /metrics SPDY/3\r\n", Err(HttpError::Malformed)),
            (b"GET  /metrics HTTP/1.1\r\n", Err(HttpError::Malformed)),
            (b"\xff\xfe /metrics HTTP/1.1\r\n", Err(HttpError::Malformed)),
        ];
        for (i, (b, want)) in rows.iter().enumerate() {
            assert_eq!(parse_request(b), *want, "row {i}");
        }
    }

    #[test]
    fn a_scrape_over_tcp() {
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let c = calls.clone();
        let e = Exporter::serve(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(move || {
                let n = c.fetch_add(1, Ordering::Relaxed) + 1;
                vec![Family::one(
                    "xlane_scrapes_total",
                    "Scrapes.",
                    Kind::Counter,
                    n as f64,
                )]
            }),
        )
        .unwrap();
        let get = |req: &str| {
            let mut s = TcpStream::connect(e.local_addr()).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        };
        let a = get("GET /metrics HTTP/1.1\r\n\r\n");
        assert!(a.starts_with("HTTP/1.1 200 OK\r\n"), "{a}");
        assert!(a.ends_with("xlane_scrapes_total 1\n"), "{a}");
        assert!(get("GET /metrics HTTP/1.1\r\n\r\n").ends_with("xlane_scrapes_total 2\n"));
        assert!(get("GET /x HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get("PUT /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(get("nonsense\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert_eq!(calls.load(Ordering::Relaxed), 2);
    }
}
