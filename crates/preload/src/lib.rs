//! `libxlane_preload.so`: the `LD_PRELOAD` library of `xlane run`.
//!
//! It puts the sockets of an unmodified program, and of every program it
//! starts (they inherit `LD_PRELOAD`), on a QJump level: the level's DSCP
//! (`IP_TOS`, and `IPV6_TCLASS` on IPv6 sockets) and its `SO_PRIORITY`.
//! The TOS is set first and the priority second, since setting `IP_TOS`
//! overwrites `SO_PRIORITY` on Linux.
//!
//! What it wraps (each calls the real function found with
//! `dlsym(RTLD_NEXT, ...)`):
//!
//! * `socket`: an IPv4/IPv6 socket is marked at once when no port filter
//!   is given (with a filter its port is not known yet);
//! * `bind`: marked when the local port is listed;
//! * `connect`: marked before connecting when the remote (or the bound
//!   local) port is listed, so the first packet already carries the mark;
//! * `accept`, `accept4`: the new socket is marked when its local or
//!   remote port is listed;
//! * `sendto`, `sendmsg` (with a port filter): a socket that sends to a
//!   listed port without having been connected or bound to one (a UDP
//!   client such as sockperf's) is marked before its first such datagram;
//!   a bitmap of marked descriptors (cleared when `socket`/`accept` hands
//!   the number out again) keeps the check to one atomic load per send;
//! * `setsockopt`: when the program sets `IP_TOS`, `IPV6_TCLASS` or
//!   `SO_PRIORITY` on a socket that is on the level, its call goes
//!   through (its return value and `errno` are the program's), then the
//!   level is applied again: the program cannot leave the level.
//!
//! Configuration: the variables of [`xlane_level::env`], set by `xlane
//! run`. Without them the library does nothing; with a bad value it says
//! so once on stderr and does nothing.
//!
//! Errors never change the program's behaviour: the wrapped call's result
//! and `errno` are returned unchanged; if marking fails, the socket's old
//! TOS and priority are put back and the failure is reported once on
//! stderr. No wrapper allocates; the marking runs under `catch_unwind`,
//! and is written not to panic.
//!
//! Not covered: programs that make system calls without libc (Go, such
//! as etcd; static binaries) — `xlane run` marks their traffic with a
//! packet classifier instead; `sendmmsg` and descriptors made by other
//! calls (`dup`, `socketpair`) are not looked at.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use libc::{c_int, c_void, sockaddr, socklen_t};
use xlane_level::env::{parse_config, LevelConfig, ENV_PORTS, ENV_PRIORITY, ENV_TOS};

// ------------------------------------------------------------ configuration

static CONFIG: OnceLock<Option<LevelConfig>> = OnceLock::new();
static REPORTED: AtomicBool = AtomicBool::new(false);

/// Writes `xlane-preload: <msg>` to stderr, the first time only.
fn report_once(msg: &str) {
    if REPORTED.swap(true, Ordering::Relaxed) {
        return;
    }
    for part in [
        "xlane-preload: ",
        msg,
        " (the program runs on without its level)\n",
    ] {
        // SAFETY: writing a valid buffer of its own length to fd 2.
        unsafe {
            libc::write(2, part.as_ptr() as *const c_void, part.len());
        }
    }
}

/// The value of variable `name` (NUL-terminated), if set.
fn env_bytes(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv gets a NUL-terminated name; its result, when not
    // null, is a NUL-terminated string that lives as long as the
    // environment is not changed (the library reads it once, here).
    unsafe {
        let p = libc::getenv(name.as_ptr());
        if p.is_null() {
            None
        } else {
            Some(CStr::from_ptr(p).to_bytes())
        }
    }
}

fn config() -> Option<&'static LevelConfig> {
    CONFIG
        .get_or_init(|| {
            // The names with a NUL, without allocating.
            const TOS: &CStr = c"XLANE_LEVEL_TOS";
            const PRIO: &CStr = c"XLANE_LEVEL_PRIORITY";
            const PORTS: &CStr = c"XLANE_LEVEL_PORTS";
            debug_assert_eq!(TOS.to_bytes(), ENV_TOS.as_bytes());
            debug_assert_eq!(PRIO.to_bytes(), ENV_PRIORITY.as_bytes());
            debug_assert_eq!(PORTS.to_bytes(), ENV_PORTS.as_bytes());
            match parse_config(env_bytes(TOS), env_bytes(PRIO), env_bytes(PORTS)) {
                Ok(c) => c,
                Err(e) => {
                    report_once(e.message());
                    None
                }
            }
        })
        .as_ref()
}

// ------------------------------------------------------------ real functions

/// Looks up (once) the next definition of `name` after this library.
fn next_symbol(name: &CStr, slot: &AtomicUsize) -> usize {
    let p = slot.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    slot.store(p, Ordering::Release);
    p
}

macro_rules! real {
    ($name:literal, $ty:ty) => {{
        static SLOT: AtomicUsize = AtomicUsize::new(0);
        let p = next_symbol($name, &SLOT);
        if p == 0 {
            None
        } else {
            // SAFETY: the symbol of that name in libc has this type.
            Some(unsafe { std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}

type SocketFn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type AddrFn = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
type AcceptFn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
type Accept4Fn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
type SendtoFn = unsafe extern "C" fn(
    c_int,
    *const c_void,
    libc::size_t,
    c_int,
    *const sockaddr,
    socklen_t,
) -> libc::ssize_t;
type SendmsgFn = unsafe extern "C" fn(c_int, *const libc::msghdr, c_int) -> libc::ssize_t;
type SetsockoptFn = unsafe extern "C" fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int;

fn real_setsockopt() -> Option<SetsockoptFn> {
    real!(c"setsockopt", SetsockoptFn)
}

fn errno() -> c_int {
    // SAFETY: the thread's errno location is always valid.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v }
}

fn no_symbol() -> c_int {
    set_errno(libc::ENOSYS);
    -1
}

// ------------------------------------------------------------ marking

fn get_int(fd: c_int, level: c_int, name: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: v and len are valid for writing an int.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut c_int as *mut c_void,
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

fn set_int(fd: c_int, level: c_int, name: c_int, v: c_int) -> bool {
    let Some(f) = real_setsockopt() else {
        return false;
    };
    // SAFETY: v is a valid int of the given length.
    unsafe {
        f(
            fd,
            level,
            name,
            &v as *const c_int as *const c_void,
            std::mem::size_of::<c_int>() as socklen_t,
        ) == 0
    }
}

/// The socket's address family, if it is IPv4 or IPv6.
fn inet_family(fd: c_int) -> Option<c_int> {
    let d = get_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)?;
    (d == libc::AF_INET || d == libc::AF_INET6).then_some(d)
}

/// The port of an IPv4/IPv6 address (`None` for other families or a
/// short address).
///
/// # Safety
/// `addr` is null or valid for `len` bytes.
unsafe fn port_of(addr: *const sockaddr, len: socklen_t) -> Option<u16> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sockaddr_in>() {
        return None;
    }
    let family = (*addr).sa_family as c_int;
    if family == libc::AF_INET {
        Some(u16::from_be((*(addr as *const libc::sockaddr_in)).sin_port))
    } else if family == libc::AF_INET6 && len as usize >= std::mem::size_of::<libc::sockaddr_in6>()
    {
        Some(u16::from_be(
            (*(addr as *const libc::sockaddr_in6)).sin6_port,
        ))
    } else {
        None
    }
}

type NameFn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;

fn port_by(fd: c_int, f: NameFn) -> Option<u16> {
    // SAFETY: a zeroed sockaddr_storage is a valid buffer of its length.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
        if f(fd, &mut ss as *mut _ as *mut sockaddr, &mut len) != 0 {
            return None;
        }
        port_of(&ss as *const _ as *const sockaddr, len).filter(|&p| p != 0)
    }
}

/// Whether socket `fd` belongs on the level (`extra`: a port about to be
/// used, such as the one being connected to).
fn belongs(cfg: &LevelConfig, fd: c_int, extra: Option<u16>) -> Option<c_int> {
    let family = inet_family(fd)?;
    if cfg.ports.is_empty() {
        return Some(family);
    }
    let listed = |p: Option<u16>| p.is_some_and(|p| cfg.ports.contains(p));
    (listed(extra)
        || listed(port_by(fd, libc::getsockname))
        || listed(port_by(fd, libc::getpeername)))
    .then_some(family)
}

/// Applies the level to `fd`: TOS (traffic class) first, priority second.
/// On failure the old values are put back and the failure reported once.
fn apply(cfg: &LevelConfig, fd: c_int, family: c_int) {
    let (tl, tn) = if family == libc::AF_INET6 {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS)
    };
    let old_tos = get_int(fd, tl, tn);
    let old_prio = get_int(fd, libc::SOL_SOCKET, libc::SO_PRIORITY);
    let tos = cfg.tos as c_int;
    let mut ok = set_int(fd, tl, tn, tos);
    if ok && family == libc::AF_INET6 {
        // IPv4-mapped traffic of a dual-stack socket; an IPv6-only socket
        // may refuse, which is no failure.
        let _ = set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, tos);
    }
    ok = ok
        && set_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            cfg.priority as c_int,
        );
    if !ok {
        if let Some(t) = old_tos {
            let _ = set_int(fd, tl, tn, t);
        }
        if let Some(p) = old_prio {
            let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_PRIORITY, p);
        }
        report_once("could not set a socket's TOS or SO_PRIORITY");
    }
}

/// Marks `fd` if it belongs on the level, keeping `errno` as it was and
/// never unwinding into the caller.
fn mark(fd: c_int, extra: Option<u16>, only_without_filter: bool) {
    if fd < 0 {
        return;
    }
    let Some(cfg) = config() else {
        return;
    };
    if only_without_filter && !cfg.ports.is_empty() {
        return;
    }
    let saved = errno();
    let r = std::panic::catch_unwind(|| {
        if let Some(family) = belongs(cfg, fd, extra) {
            apply(cfg, fd, family);
        }
    });
    if r.is_err() {
        report_once("internal error while marking a socket");
    }
    set_errno(saved);
}

// ------------------------------------------------------------ sends

/// Descriptors below this are tracked in [`SENT_MARKED`].
const TRACKED_FDS: usize = 1 << 16;
/// One bit per descriptor: already looked at by a send wrapper.
static SENT_MARKED: [AtomicU64; TRACKED_FDS / 64] = [const { AtomicU64::new(0) }; TRACKED_FDS / 64];

fn bit(fd: c_int) -> Option<(&'static AtomicU64, u64)> {
    let i = usize::try_from(fd).ok().filter(|&i| i < TRACKED_FDS)?;
    Some((&SENT_MARKED[i / 64], 1u64 << (i % 64)))
}

/// Forgets `fd` (its number was handed out anew).
fn forget(fd: c_int) {
    if let Some((w, b)) = bit(fd) {
        w.fetch_and(!b, Ordering::Relaxed);
    }
}

/// Before a datagram to `dest`: marks `fd` once if the port is listed.
///
/// # Safety
/// `dest` is null or valid for `len` bytes.
unsafe fn mark_on_send(fd: c_int, dest: *const sockaddr, len: socklen_t) {
    let Some(cfg) = config() else {
        return;
    };
    if cfg.ports.is_empty() || dest.is_null() {
        return;
    }
    let Some((w, b)) = bit(fd) else {
        return;
    };
    if w.load(Ordering::Relaxed) & b != 0 {
        return;
    }
    if let Some(p) = port_of(dest, len).filter(|&p| cfg.ports.contains(p)) {
        w.fetch_or(b, Ordering::Relaxed);
        mark(fd, Some(p), false);
    }
}

// ------------------------------------------------------------ wrappers

/// `socket(2)`, marked when no port filter is set.
///
/// # Safety
/// As `socket(2)`.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let Some(f) = real!(c"socket", SocketFn) else {
        return no_symbol();
    };
    let fd = f(domain, ty, protocol);
    forget(fd);
    if domain == libc::AF_INET || domain == libc::AF_INET6 {
        mark(fd, None, true);
    }
    fd
}

/// `bind(2)`, marked afterwards when the local port is listed.
///
/// # Safety
/// As `bind(2)`.
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(f) = real!(c"bind", AddrFn) else {
        return no_symbol();
    };
    let r = f(fd, addr, len);
    if r == 0 {
        mark(fd, None, false);
    }
    r
}

/// `connect(2)`, marked before connecting when a port is listed.
///
/// # Safety
/// As `connect(2)`.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(f) = real!(c"connect", AddrFn) else {
        return no_symbol();
    };
    mark(fd, port_of(addr, len), false);
    f(fd, addr, len)
}

/// `accept(2)`; the new socket is marked.
///
/// # Safety
/// As `accept(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let Some(f) = real!(c"accept", AcceptFn) else {
        return no_symbol();
    };
    let nfd = f(fd, addr, len);
    forget(nfd);
    mark(nfd, None, false);
    nfd
}

/// `accept4(2)`; the new socket is marked.
///
/// # Safety
/// As `accept4(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    let Some(f) = real!(c"accept4", Accept4Fn) else {
        return no_symbol();
    };
    let nfd = f(fd, addr, len, flags);
    forget(nfd);
    mark(nfd, None, false);
    nfd
}

/// `sendto(2)`; a datagram to a listed port marks the socket first.
///
/// # Safety
/// As `sendto(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: libc::size_t,
    flags: c_int,
    dest: *const sockaddr,
    len: socklen_t,
) -> libc::ssize_t {
    let Some(f) = real!(c"sendto", SendtoFn) else {
        return no_symbol() as libc::ssize_t;
    };
    mark_on_send(fd, dest, len);
    f(fd, buf, n, flags, dest, len)
}

/// `sendmsg(2)`; a message to a listed port marks the socket first.
///
/// # Safety
/// As `sendmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(
    fd: c_int,
    msg: *const libc::msghdr,
    flags: c_int,
) -> libc::ssize_t {
    let Some(f) = real!(c"sendmsg", SendmsgFn) else {
        return no_symbol() as libc::ssize_t;
    };
    if !msg.is_null() {
        mark_on_send(fd, (*msg).msg_name as *const sockaddr, (*msg).msg_namelen);
    }
    f(fd, msg, flags)
}

/// `setsockopt(2)`; after the program sets the TOS, traffic class or
/// priority of a socket on the level, the level is applied again.
///
/// # Safety
/// As `setsockopt(2)`.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    let Some(f) = real_setsockopt() else {
        return no_symbol();
    };
    let r = f(fd, level, name, value, len);
    let ours = (level == libc::IPPROTO_IP && name == libc::IP_TOS)
        || (level == libc::IPPROTO_IPV6 && name == libc::IPV6_TCLASS)
        || (level == libc::SOL_SOCKET && name == libc::SO_PRIORITY);
    if ours {
        mark(fd, None, false);
    }
    r
}
