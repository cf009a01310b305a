//! The recovery protocol's messages, between hops, processes and the
//! recovery coordinator ([`crate::coordinator`]). They share the sockets
//! of the data path; their first byte ([`CTL_MAGIC`]) differs from a data
//! packet's ([`crate::wire::MAGIC`]).
//!
//! Encoding, integers big-endian: `magic:u8 | version:u8 | kind:u8 | body`
//! - `Silent` (hop → coordinator): `link ip:4 port:2 | barrier:u64 |
//!   commit:u64`, sent again while the held link waits for its removal;
//! - `Remove` (coordinator → hop) and `Removed` (hop → coordinator):
//!   `link ip:4 port:2`;
//! - `ProcFail` (coordinator → process): `proc:u32 | t_fail:u64`;
//! - `ProcFailAck` (process → coordinator): `proc:u32 | from:u32`.

use std::net::{Ipv4Addr, SocketAddrV4};

/// First byte of a control message.
pub const CTL_MAGIC: u8 = 0x1C;
/// Version byte.
pub const CTL_VERSION: u8 = 1;
/// The longest control message.
pub const CTL_MAX_LEN: usize = 3 + 6 + 16;

/// A control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctl {
    /// A hop holds the silent input `link`, whose last barriers were these.
    Silent {
        /// The input link (its source address).
        link: SocketAddrV4,
        /// Its last best-effort barrier.
        barrier: u64,
        /// Its last commit barrier: the failure timestamp.
        commit: u64,
    },
    /// Remove the held input `link`: the recovery is done.
    Remove {
        /// The link.
        link: SocketAddrV4,
    },
    /// The input `link` is removed (or was never live).
    Removed {
        /// The link.
        link: SocketAddrV4,
    },
    /// Process `proc` failed at `t_fail`: discard its messages above it,
    /// abort scatterings to it, call `proc_fail`.
    ProcFail {
        /// The failed process.
        proc: u32,
        /// The failure timestamp.
        t_fail: u64,
    },
    /// Process `from` has done what `ProcFail` of `proc` asked.
    ProcFailAck {
        /// The failed process.
        proc: u32,
        /// Who confirms.
        from: u32,
    },
}

/// Why a control message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CtlError {
    /// Not a control message (another first byte).
    #[error("not a control message (first byte {0:#04x})")]
    Magic(u8),
    /// An unknown version.
    #[error("unknown control version {0}")]
    Version(u8),
    /// An unknown kind.
    #[error("unknown control kind {0}")]
    Kind(u8),
    /// Shorter or longer than its kind.
    #[error("control message of kind {kind} is {len} bytes, expected {want}")]
    Length {
        /// The kind.
        kind: u8,
        /// Its length.
        len: usize,
        /// The length of that kind.
        want: usize,
    },
}

const K_SILENT: u8 = 1;
const K_REMOVE: u8 = 2;
const K_REMOVED: u8 = 3;
const K_PROC_FAIL: u8 = 4;
const K_PROC_FAIL_ACK: u8 = 5;

fn put_addr(a: SocketAddrV4, out: &mut Vec<u8>) {
    out.extend_from_slice(&a.ip().octets());
    out.extend_from_slice(&a.port().to_be_bytes());
}

fn addr(b: &[u8]) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::new(b[0], b[1], b[2], b[3]),
        u16::from_be_bytes([b[4], b[5]]),
    )
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn u64_at(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[..8]);
    u64::from_be_bytes(x)
}

impl Ctl {
    fn kind(&self) -> u8 {
        match self {
            Ctl::Silent { .. } => K_SILENT,
            Ctl::Remove { .. } => K_REMOVE,
            Ctl::Removed { .. } => K_REMOVED,
            Ctl::ProcFail { .. } => K_PROC_FAIL,
            Ctl::ProcFailAck { .. } => K_PROC_FAIL_ACK,
        }
    }

    /// Appends the encoding to `out` (at most [`CTL_MAX_LEN`] bytes).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[CTL_MAGIC, CTL_VERSION, self.kind()]);
        match *self {
            Ctl::Silent {
                link,
                barrier,
                commit,
            } => {
                put_addr(link, out);
                out.extend_from_slice(&barrier.to_be_bytes());
                out.extend_from_slice(&commit.to_be_bytes());
            }
            Ctl::Remove { link } | Ctl::Removed { link } => put_addr(link, out),
            Ctl::ProcFail { proc, t_fail } => {
                out.extend_from_slice(&proc.to_be_bytes());
                out.extend_from_slice(&t_fail.to_be_bytes());
            }
            Ctl::ProcFailAck { proc, from } => {
                out.extend_from_slice(&proc.to_be_bytes());
                out.extend_from_slice(&from.to_be_bytes());
            }
        }
    }

    /// Whether `b` starts like a control message (then [`Ctl::parse`] it).
    pub fn is_ctl(b: &[u8]) -> bool {
        b.first() == Some(&CTL_MAGIC)
    }

    /// Parses one datagram, all of `b`.
    pub fn parse(b: &[u8]) -> Result<Ctl, CtlError> {
        match b.first() {
            Some(&CTL_MAGIC) => {}
            other => return Err(CtlError::Magic(other.copied().unwrap_or(0))),
        }
        if b.len() < 3 {
            return Err(CtlError::Length {
                kind: 0,
                len: b.len(),
                want: 3,
            });
        }
        if b[1] != CTL_VERSION {
            return Err(CtlError::Version(b[1]));
        }
        let kind = b[2];
        let want = 3 + match kind {
            K_SILENT => 22,
            K_REMOVE | K_REMOVED => 6,
            K_PROC_FAIL => 12,
            K_PROC_FAIL_ACK => 8,
            k => return Err(CtlError::Kind(k)),
        };
        if b.len() != want {
            return Err(CtlError::Length {
                kind,
                len: b.len(),
                want,
            });
        }
        let x = &b[3..];
        Ok(match kind {
            K_SILENT => Ctl::Silent {
                link: addr(x),
                barrier: u64_at(&x[6..]),
                commit: u64_at(&x[14..]),
            },
            K_REMOVE => Ctl::Remove { link: addr(x) },
            K_REMOVED => Ctl::Removed { link: addr(x) },
            K_PROC_FAIL => Ctl::ProcFail {
                proc: u32_at(x),
                t_fail: u64_at(&x[4..]),
            },
            _ => Ctl::ProcFailAck {
                proc: u32_at(x),
                from: u32_at(&x[4..]),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_table() {
        let a: SocketAddrV4 = "10.0.0.3:7401".parse().unwrap();
        for m in [
            Ctl::Silent {
                link: a,
                barrier: 9,
                commit: 7,
            },
            Ctl::Remove { link: a },
            Ctl::Removed { link: a },
            Ctl::ProcFail {
                proc: 3,
                t_fail: u64::MAX,
            },
            Ctl::ProcFailAck { proc: 3, from: 1 },
        ] {
            let mut b = Vec::new();
            m.emit(&mut b);
            assert!(b.len() <= CTL_MAX_LEN && Ctl::is_ctl(&b));
            assert_eq!(Ctl::parse(&b), Ok(m), "{m:?}");
            assert!(Ctl::parse(&b[..b.len() - 1]).is_err(), "{m:?} cut");
        }
    }

    #[test]
    fn refusals_table() {
        let cases: [(&[u8], CtlError); 5] = [
            (&[], CtlError::Magic(0)),
            (
                &[crate::wire::MAGIC, 1, 1],
                CtlError::Magic(crate::wire::MAGIC),
            ),
            (&[CTL_MAGIC, 2, 1], CtlError::Version(2)),
            (&[CTL_MAGIC, 1, 9], CtlError::Kind(9)),
            (
                &[CTL_MAGIC, 1, K_REMOVE, 1, 2],
                CtlError::Length {
                    kind: K_REMOVE,
                    len: 5,
                    want: 9,
                },
            ),
        ];
        for (b, want) in cases {
            assert_eq!(Ctl::parse(b), Err(want), "{b:?}");
        }
    }
}
