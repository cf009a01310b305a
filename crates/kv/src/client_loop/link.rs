//! A client connection's byte stream: plain TCP, or TLS over it
//! ([`crate::tls`]), both non-blocking.
//!
//! The loop's epoll set is level-triggered on the socket, which is not
//! enough for TLS: rustls may hold input already taken from the socket
//! (decrypted, or a whole record not yet decrypted) when a read stops on
//! the loop's budget, and the socket will not report it again. The link
//! says so ([`Link::pending_input`]) and the loop reads it again in its
//! next turn. Likewise rustls may hold TLS bytes to send (handshake
//! messages, records of replies the socket did not take):
//! [`Link::wants_write`] keeps the loop asking for `EPOLLOUT`.

use rustls::ServerConnection;
use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

pub(super) enum Link {
    Plain(TcpStream),
    Tls(Box<Tls>),
}

pub(super) struct Tls {
    sock: TcpStream,
    conn: ServerConnection,
    /// A read stopped with input possibly left in `conn`.
    pending: bool,
    /// The socket reported its end (or `close_notify` came).
    eof: bool,
}

impl Link {
    /// A TLS server connection over `sock` under `config`.
    pub(super) fn tls(
        sock: TcpStream,
        config: std::sync::Arc<rustls::ServerConfig>,
    ) -> Result<Link, rustls::Error> {
        Ok(Link::Tls(Box::new(Tls {
            sock,
            conn: ServerConnection::new(config)?,
            pending: false,
            eof: false,
        })))
    }

    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Link::Plain(s) => s,
            Link::Tls(t) => &t.sock,
        }
    }

    /// Bytes wait in the link to be sent once the socket takes them.
    pub(super) fn wants_write(&self) -> bool {
        match self {
            Link::Plain(_) => false,
            Link::Tls(t) => t.conn.wants_write(),
        }
    }

    /// Input may wait in the link that the socket will not report.
    pub(super) fn pending_input(&self) -> bool {
        match self {
            Link::Plain(_) => false,
            Link::Tls(t) => t.pending,
        }
    }

    /// A TLS link still in its handshake.
    pub(super) fn handshaking(&self) -> bool {
        match self {
            Link::Plain(_) => false,
            Link::Tls(t) => t.conn.is_handshaking(),
        }
    }
}

/// Plaintext in: `Ok(0)` at the end of input, `WouldBlock` when none is
/// there now.
impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => s.read(buf),
            Link::Tls(t) => t.read(buf),
        }
    }
}

/// Plaintext out: a TLS link encrypts what it takes and sends what the
/// socket takes; the rest of the records wait in rustls
/// ([`Link::wants_write`]). `WouldBlock` when nothing can be taken now.
impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => s.write(buf),
            Link::Tls(t) => t.write(buf),
        }
    }

    /// Sends what a TLS link holds (handshake messages, records), as much
    /// as the socket takes now (not all of it: the socket is non-blocking).
    /// Nothing for a plain link.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Link::Plain(_) => Ok(()),
            Link::Tls(t) => t.flush_tls(),
        }
    }
}

impl AsRawFd for Link {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}

impl Tls {
    /// Decrypts until `buf` is full or the socket has nothing more: at most
    /// `buf.len()` bytes of plaintext plus one read (4 KiB, or the rest
    /// of one record) stay in rustls between calls.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        loop {
            match self.conn.reader().read(&mut buf[filled..]) {
                Ok(n) => {
                    filled += n;
                    if n == 0 && filled == 0 {
                        // close_notify: a clean end.
                        self.pending = false;
                        return Ok(0);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // The peer closed the socket without close_notify.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => self.eof = true,
                Err(e) => return Err(e),
            }
            if filled == buf.len() {
                self.pending = true;
                return Ok(filled);
            }
            if self.eof {
                self.pending = false;
                return Ok(filled);
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.pending = false;
                    return if filled > 0 { Ok(filled) } else { Err(e) };
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            if let Err(e) = self.conn.process_new_packets() {
                // The alert rustls queued goes out with the next flush.
                let _ = self.flush_tls();
                return Err(io::Error::new(ErrorKind::InvalidData, e));
            }
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.flush_tls()?;
        let n = self.conn.writer().write(buf)?;
        self.flush_tls()?;
        if n == 0 && !buf.is_empty() {
            // rustls's send buffer is full until the socket takes more.
            return Err(ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush_tls(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
