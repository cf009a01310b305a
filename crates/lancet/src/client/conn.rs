//! An agent's connections: UDP sockets or TCP connections, opened before
//! the start.

use super::error::RunError;
use super::limits::{TCP_BUF, TX_RING};
use super::plan::AgentPlan;
use super::tcp::{tcp_stamps, TcpConn};
use super::udp::UdpConn;
use crate::config::ClientConfig;
use crate::tstamp::{Numbering, TxMatch};
use crate::Transport;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;
use xlane_host::socket::{LaneSocket, SocketConfig};

pub(super) enum Conn {
    /// Boxed: the socket's control-message buffer makes it much larger than a TCP one.
    Udp(Box<UdpConn>),
    Tcp(TcpConn),
}

impl Conn {
    pub(super) fn fd(&self) -> i32 {
        match self {
            Conn::Udp(u) => u.sock.as_raw_fd(),
            Conn::Tcp(t) => t.stream.as_raw_fd(),
        }
    }
}
pub(super) fn open_conns(cfg: &ClientConfig, plan: &AgentPlan) -> Result<Vec<Conn>, RunError> {
    let mut out = Vec::with_capacity(plan.conns);
    for _ in 0..plan.conns {
        match cfg.transport {
            Transport::Udp | Transport::R2p2 => {
                let mut sc = SocketConfig::plain(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
                sc.nonblocking = true;
                sc.rx_timestamps = plan.measure;
                sc.rcvbuf = 4 << 20;
                let mut sock = LaneSocket::open(&sc)?;
                if plan.measure {
                    sock.enable_tx_timestamps()?;
                }
                out.push(Conn::Udp(Box::new(UdpConn {
                    sock,
                    tx: TxMatch::new(Numbering::Datagram, TX_RING),
                })));
            }
            Transport::Tcp => {
                let stream =
                    TcpStream::connect_timeout(&SocketAddr::V4(cfg.target), Duration::from_secs(3))
                        .map_err(|source| RunError::Connect {
                            target: cfg.target,
                            source,
                        })?;
                let io = |what| move |source| RunError::Io { what, source };
                stream.set_nodelay(true).map_err(io("TCP_NODELAY"))?;
                stream
                    .set_nonblocking(true)
                    .map_err(io("set_nonblocking"))?;
                let stamps = if plan.measure {
                    Some(Box::new(tcp_stamps(&stream, cfg)?))
                } else {
                    None
                };
                out.push(Conn::Tcp(TcpConn {
                    stream,
                    out: Vec::with_capacity(TCP_BUF),
                    out_at: 0,
                    inb: vec![0u8; TCP_BUF],
                    have: 0,
                    broken: false,
                    stamps,
                }));
            }
        }
    }
    Ok(out)
}
