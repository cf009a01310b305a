//! The agent's TCP connections: queueing and writing requests, reading the
//! transmit stamps, and reassembling responses from the byte stream.

use super::error::RunError;
use super::limits::{RECV_BUDGET, TX_RING};
use super::tracker::Tracker;
use crate::config::ClientConfig;
use crate::tstamp::{self, CmsgBuf, Numbering, StampedRead, TxMatch, CMSG_WORDS};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use xlane_host::socket::realtime_ns;

pub(super) struct TcpConn {
    pub(super) stream: TcpStream,
    pub(super) out: Vec<u8>,
    pub(super) out_at: usize,
    pub(super) inb: Vec<u8>,
    pub(super) have: usize,
    pub(super) broken: bool,
    /// Kernel stamps, on the connections of measuring agents.
    pub(super) stamps: Option<Box<TcpStamps>>,
}

/// The stamping state of a measured TCP connection.
pub(super) struct TcpStamps {
    /// Transmit stamps to requests (stream numbering).
    pub(super) tx: TxMatch,
    /// Control messages of `recvmsg`.
    pub(super) cmsg: CmsgBuf,
    /// The length of a response ([`App::response_len`](crate::proto::App::response_len)): reads stop there.
    pub(super) response_len: usize,
}

/// Queue request `id` on a TCP connection and push what the socket takes.
pub(super) fn tcp_queue(t: &mut TcpConn, tr: &mut Tracker, req: &[u8], id: u64) -> bool {
    if t.out.len() + req.len() > t.out.capacity() {
        t.out.drain(..t.out_at);
        t.out_at = 0;
        if t.out.len() + req.len() > t.out.capacity() {
            return false; // the server does not keep up: refuse, do not grow
        }
    }
    t.out.extend_from_slice(req);
    if let Some(s) = &mut t.stamps {
        s.tx.push(id);
    }
    tcp_flush(t, tr);
    true
}

/// Write what is queued. On a stamped connection every send call ends at a
/// request boundary or after a request's first segment
/// ([`TxMatch::write_limit`]), and the stamps of what was sent are read.
pub(super) fn tcp_flush(t: &mut TcpConn, tr: &mut Tracker) {
    if t.broken {
        return;
    }
    let mut wrote = false;
    while t.out_at < t.out.len() {
        let pending = t.out.len() - t.out_at;
        let n = t
            .stamps
            .as_ref()
            .map_or(pending, |s| s.tx.write_limit(pending));
        match t.stream.write(&t.out[t.out_at..t.out_at + n]) {
            Ok(0) => {
                t.broken = true;
                break;
            }
            Ok(n) => {
                t.out_at += n;
                wrote = true;
                if let Some(s) = &mut t.stamps {
                    s.tx.wrote(n as u64);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => {
                t.broken = true;
                break;
            }
        }
    }
    if t.out_at == t.out.len() {
        t.out.clear();
        t.out_at = 0;
    }
    if wrote {
        // As on UDP: the software stamps are usually queued by now.
        tcp_drain_tx(t, tr);
    }
}

pub(super) fn tcp_drain_tx(t: &mut TcpConn, tr: &mut Tracker) {
    let stream = &t.stream;
    if let Some(TcpStamps { tx, cmsg, .. }) = t.stamps.as_deref_mut() {
        tr.drain_tx_stamps(tx, || tstamp::recv_tx_stamp(stream, cmsg));
    }
}

/// One read: on a stamped connection with the stamps of the last segment
/// read, and never past the end of the response being assembled (so that
/// the read completing a response carries that response's stamp).
pub(super) fn tcp_read(t: &mut TcpConn) -> io::Result<Option<StampedRead>> {
    // have <= inb.len(): `have` only grows by what a read put into
    // `inb[have..]`, and the caller stops at a full buffer.
    let room = t.inb.len() - t.have;
    match t.stamps.as_deref_mut() {
        Some(s) => {
            let want = match s.response_len.saturating_sub(t.have) {
                0 => room,
                w => w.min(room),
            };
            let buf = &mut t.inb[t.have..t.have + want];
            tstamp::recv_stamped(&t.stream, buf, &mut s.cmsg)
        }
        None => match t.stream.read(&mut t.inb[t.have..]) {
            Ok(len) => Ok(Some(StampedRead {
                len,
                software_ns: None,
                hardware_ns: None,
            })),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        },
    }
}

pub(super) fn tcp_receive(t: &mut TcpConn, tr: &mut Tracker) {
    if t.broken {
        return;
    }
    for _ in 0..RECV_BUDGET {
        if t.have == t.inb.len() {
            // A whole buffer without one complete message cannot happen with
            // valid framing (messages are at most MAX_MESSAGE_LEN).
            t.broken = true;
            tr.counts.malformed += 1;
            return;
        }
        let r = match tcp_read(t) {
            Ok(Some(r)) if r.len == 0 => {
                t.broken = true;
                return;
            }
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                t.broken = true;
                tr.counts.recv_errors += 1;
                return;
            }
        };
        let user_rx = realtime_ns();
        t.have += r.len;
        let mut at = 0;
        loop {
            match tr.app.frame_len(&t.inb[at..t.have], tr.size) {
                Ok(Some(len)) => {
                    match tr.app.parse_response(&t.inb[at..at + len], tr.size) {
                        Ok(resp) => {
                            if tr.needs_tx_stamp(resp.id) {
                                tcp_drain_tx(t, tr);
                            }
                            tr.complete(
                                resp.id,
                                r.software_ns,
                                r.hardware_ns,
                                user_rx,
                                resp.server_ns,
                            )
                        }
                        Err(_) => tr.counts.malformed += 1,
                    }
                    at += len;
                }
                Ok(None) => break,
                Err(_) => {
                    // A byte stream cannot be resynchronised.
                    tr.counts.malformed += 1;
                    t.broken = true;
                    return;
                }
            }
        }
        t.inb.copy_within(at..t.have, 0);
        t.have -= at; // at <= have: every frame parsed lies in inb[..have]
    }
}

/// Kernel stamps on a new connection of a measuring agent, before anything
/// is written: transmit keys count from its first byte.
pub(super) fn tcp_stamps(stream: &TcpStream, cfg: &ClientConfig) -> Result<TcpStamps, RunError> {
    let io = |what| move |source| RunError::Io { what, source };
    tstamp::enable_stream_stamps(stream).map_err(io("SO_TIMESTAMPING (tcp)"))?;
    let mss = tstamp::segment_size(stream).map_err(io("TCP_MAXSEG"))?;
    Ok(TcpStamps {
        tx: TxMatch::new(
            Numbering::Stream {
                request_len: cfg.size as u64,
                first_chunk: u64::from(mss),
            },
            TX_RING,
        ),
        cmsg: [0; CMSG_WORDS],
        response_len: cfg.app.response_len(cfg.size),
    })
}
