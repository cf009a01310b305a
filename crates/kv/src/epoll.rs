//! What the event loops share, the RESP one ([`crate::client_loop`]) and
//! the transaction proxy's ([`crate::xshard::proxy`]): the house's epoll set
//! ([`xlane_host::epoll::Epoll`], level-triggered, polled without waiting),
//! and the bounded reads and writes of their non-blocking connections.

use std::io::{ErrorKind, Read, Write};

pub(crate) use xlane_host::epoll::Epoll;

/// How a bounded read of a non-blocking connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadEnd {
    /// All there was (level-triggered: more is reported by the next wait).
    Drained,
    /// The budget is spent; more may wait.
    Budget,
    /// The peer closed its side.
    Eof,
    /// Reset by the peer, or broken: nothing more can be answered.
    Broken,
}

/// Reads from `r` into `chunk` until it has nothing more now or `budget`
/// bytes came, handing each read to `feed`. A read shorter than `chunk`
/// ends it: no read that finds nothing.
pub(crate) fn read_within(
    r: &mut impl Read,
    chunk: &mut [u8],
    budget: usize,
    mut feed: impl FnMut(&[u8]),
) -> ReadEnd {
    let mut got = 0;
    while got < budget {
        match r.read(chunk) {
            Ok(0) => return ReadEnd::Eof,
            Ok(n) => {
                feed(&chunk[..n]);
                got += n;
                if n < chunk.len() {
                    return ReadEnd::Drained;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return ReadEnd::Drained,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return ReadEnd::Broken,
        }
    }
    ReadEnd::Budget
}

/// What a read that ended with `end` makes of a connection's state: at the
/// end of its input it is closed once everything is answered (`eof`);
/// broken, it is closed at once (`quit`) with nothing more to send.
pub(crate) fn after_read(end: ReadEnd, eof: &mut bool, quit: &mut bool, out: &mut Vec<u8>) {
    match end {
        ReadEnd::Drained | ReadEnd::Budget => {}
        ReadEnd::Eof => *eof = true,
        ReadEnd::Broken => {
            *eof = true;
            *quit = true;
            out.clear();
        }
    }
}

/// Writes as much of `out` as `w` takes now: how many bytes, and whether
/// the connection broke.
pub(crate) fn write_within(w: &mut impl Write, out: &[u8]) -> (usize, bool) {
    let mut written = 0;
    while written < out.len() {
        match w.write(&out[written..]) {
            Ok(0) => return (written, true),
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return (written, true),
        }
    }
    (written, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection that yields the given reads, then `WouldBlock`.
    struct Script(Vec<std::io::Result<Vec<u8>>>);

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(ErrorKind::WouldBlock.into());
            }
            let b = self.0.remove(0)?;
            buf[..b.len()].copy_from_slice(&b);
            Ok(b.len())
        }
    }

    #[test]
    fn bounded_reads_end_as_the_connection_says() {
        let full = || Ok(vec![7u8; 4]);
        let err = |k: ErrorKind| Err(std::io::Error::from(k));
        // (reads, budget, end, bytes fed)
        for (reads, budget, end, fed) in [
            (vec![full(), Ok(vec![1])], 100, ReadEnd::Drained, 5),
            (vec![full(), full(), full()], 8, ReadEnd::Budget, 8),
            (vec![full(), Ok(vec![])], 100, ReadEnd::Eof, 4),
            (
                vec![err(ErrorKind::Interrupted), full()],
                100,
                ReadEnd::Drained,
                4,
            ),
            (
                vec![err(ErrorKind::ConnectionReset)],
                100,
                ReadEnd::Broken,
                0,
            ),
        ] {
            let mut got = 0;
            let mut chunk = [0u8; 4];
            let e = read_within(&mut Script(reads), &mut chunk, budget, |b| got += b.len());
            assert_eq!((e, got), (end, fed));
        }
    }
}
