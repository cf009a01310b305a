//! The few `bpf(2)` commands the lane's receive path needs, called
//! directly: an `XSKMAP`, loading the steering program (the verifier's log
//! comes back in the error), and attaching it to an interface through a
//! BPF link, so that closing the link's descriptor (or the process dying)
//! detaches it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `BPF_MAP_CREATE`.
const MAP_CREATE: libc::c_long = 0;
/// `BPF_MAP_UPDATE_ELEM`.
const MAP_UPDATE_ELEM: libc::c_long = 2;
/// `BPF_MAP_DELETE_ELEM`.
const MAP_DELETE_ELEM: libc::c_long = 3;
/// `BPF_PROG_LOAD`.
const PROG_LOAD: libc::c_long = 5;
/// `BPF_LINK_CREATE`.
const LINK_CREATE: libc::c_long = 28;
/// `BPF_MAP_TYPE_HASH`.
const MAP_TYPE_HASH: u32 = 1;
/// `BPF_MAP_TYPE_XSKMAP`.
const MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_PROG_TYPE_XDP`.
const PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP`, the attach type of an XDP link.
const ATTACH_XDP: u32 = 37;

/// How the program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum XdpMode {
    /// In the driver, before an skb exists (veth supports it).
    Native,
    /// After the skb is built (`XDP_FLAGS_SKB_MODE`): any interface.
    Generic,
}

impl XdpMode {
    fn flags(self) -> u32 {
        match self {
            XdpMode::Native => 1 << 2,
            XdpMode::Generic => 1 << 1,
        }
    }

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// A failed `bpf(2)` command.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The kernel refused a command.
    #[error("bpf {what}: {source}")]
    Call {
        /// Which command.
        what: &'static str,
        /// The kernel's error.
        source: io::Error,
    },
    /// The verifier refused the program.
    #[error("the verifier refused the steering program ({source}): {log}")]
    Verifier {
        /// The kernel's error.
        source: io::Error,
        /// The verifier's last lines.
        log: String,
    },
}

/// The `bpf_attr` union, as bytes large enough for every command used.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Attr([0; 128])
    }
    fn u32(&mut self, at: usize, v: u32) -> &mut Self {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, at: usize, v: u64) -> &mut Self {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a zero-filled bpf_attr-sized buffer that outlives
    // the call; every pointer stored in it points to live memory.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd(r: libc::c_long) -> OwnedFd {
    // SAFETY: the kernel returned a fresh descriptor that we now own.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// A BPF map with `u32` keys and values.
struct Map {
    fd: OwnedFd,
}

impl Map {
    fn create(kind: u32, entries: u32, what: &'static str) -> Result<Self, BpfError> {
        let mut a = Attr::new();
        a.u32(0, kind).u32(4, 4).u32(8, 4).u32(12, entries);
        let r = bpf(MAP_CREATE, &mut a).map_err(|source| BpfError::Call { what, source })?;
        Ok(Map { fd: fd(r) })
    }

    fn update(&self, key: u32, value: u32, what: &'static str) -> Result<(), BpfError> {
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64);
        bpf(MAP_UPDATE_ELEM, &mut a)
            .map(|_| ())
            .map_err(|source| BpfError::Call { what, source })
    }

    /// Removes `key`; a missing entry is fine.
    fn delete(&self, key: u32) {
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64);
        let _ = bpf(MAP_DELETE_ELEM, &mut a);
    }
}

/// An `XSKMAP`: receive queue index → AF_XDP socket.
pub struct XskMap(Map);

impl XskMap {
    /// A map for queues `0..entries`.
    pub fn new(entries: u32) -> Result<Self, BpfError> {
        Map::create(MAP_TYPE_XSKMAP, entries, "map create (XSKMAP)").map(XskMap)
    }

    /// Frames of receive queue `queue` go to the AF_XDP socket `xsk`.
    pub fn set(&self, queue: u32, xsk: RawFd) -> Result<(), BpfError> {
        self.0.update(queue, xsk as u32, "map update (XSKMAP)")
    }

    /// The map's descriptor (for the program's map reference).
    pub fn raw_fd(&self) -> RawFd {
        self.0.fd.as_raw_fd()
    }
}

/// A hash map of `u32` keys to `u32` values (the steering program's ports).
pub struct U32Set(Map);

impl U32Set {
    /// A set of at most `entries` keys.
    pub fn new(entries: u32) -> Result<Self, BpfError> {
        Map::create(MAP_TYPE_HASH, entries, "map create (ports)").map(U32Set)
    }

    /// Adds `key`.
    pub fn insert(&self, key: u32) -> Result<(), BpfError> {
        self.0.update(key, 1, "map update (ports)")
    }

    /// Removes `key` (absent is fine).
    pub fn remove(&self, key: u32) {
        self.0.delete(key)
    }

    /// The map's descriptor.
    pub fn raw_fd(&self) -> RawFd {
        self.0.fd.as_raw_fd()
    }
}

/// A loaded XDP program.
pub struct Program {
    fd: OwnedFd,
}

/// The license the program is loaded under (it calls no GPL-only helper).
const LICENSE: &[u8] = b"Apache-2.0\0";

impl Program {
    /// Loads `insns` as an XDP program named `name` (at most 15 bytes).
    pub fn load_xdp(name: &str, insns: &[super::prog::Insn]) -> Result<Self, BpfError> {
        let mut log = vec![0u8; 64 * 1024];
        let mut a = Attr::new();
        a.u32(0, PROG_TYPE_XDP)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, LICENSE.as_ptr() as u64)
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64)
            .u32(68, ATTACH_XDP);
        let n = name.len().min(15);
        a.0[48..48 + n].copy_from_slice(&name.as_bytes()[..n]);
        match bpf(PROG_LOAD, &mut a) {
            Ok(r) => Ok(Program { fd: fd(r) }),
            Err(source) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let tail: Vec<&str> = text.lines().rev().take(6).collect();
                let log = tail.into_iter().rev().collect::<Vec<_>>().join(" | ");
                Err(BpfError::Verifier { source, log })
            }
        }
    }

    /// Attaches the program to interface `ifindex` (of the calling
    /// thread's network namespace) in `mode`; it stays attached while the
    /// returned link lives.
    pub fn attach(&self, ifindex: u32, mode: XdpMode) -> Result<Link, BpfError> {
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u32(4, ifindex)
            .u32(8, ATTACH_XDP)
            .u32(12, mode.flags());
        let r = bpf(LINK_CREATE, &mut a).map_err(|source| BpfError::Call {
            what: "link create (XDP attach)",
            source,
        })?;
        Ok(Link { _fd: fd(r), mode })
    }
}

/// An attached XDP program; dropping it detaches the program.
pub struct Link {
    _fd: OwnedFd,
    mode: XdpMode,
}

impl Link {
    /// How the program runs.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }
}
