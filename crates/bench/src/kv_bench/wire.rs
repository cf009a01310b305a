//! The clients the benchmark speaks with: RESP (Redis and xlane kv, with
//! xlane-kv's own encoder and reply decoder) and HTTP/1.1 with JSON bodies
//! for etcd's v3 gateway, including its streamed watch responses; and the
//! base64 etcd puts keys and values in.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use xlane_kv::resp::{decode_reply, encode_command, Reply};

/// A RESP connection.
pub struct Resp {
    addr: SocketAddr,
    stream: TcpStream,
    out: Vec<u8>,
    inbuf: Vec<u8>,
    chunk: Vec<u8>,
}

impl Resp {
    /// Connects to `addr`; reads wait at most `timeout`.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Resp, String> {
        let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        Ok(Resp {
            addr,
            stream: s,
            out: Vec::with_capacity(256),
            inbuf: Vec::new(),
            chunk: vec![0; 16 << 10],
        })
    }

    /// Sets how long a read waits (`None`: for ever).
    pub fn set_timeout(&self, t: Option<Duration>) -> Result<(), String> {
        self.stream.set_read_timeout(t).map_err(|e| e.to_string())
    }

    /// Another handle on the socket, to shut it down from another thread
    /// (which ends a blocked read).
    pub fn handle(&self) -> Result<TcpStream, String> {
        self.stream.try_clone().map_err(|e| e.to_string())
    }

    /// The server's address.
    pub fn peer(&self) -> Result<SocketAddr, String> {
        Ok(self.addr)
    }

    /// Queues a command.
    pub fn push(&mut self, args: &[&[u8]]) {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        encode_command(&args, &mut self.out);
    }

    /// Sends what is queued.
    pub fn flush(&mut self) -> Result<(), String> {
        let r = self.stream.write_all(&self.out).map_err(|e| e.to_string());
        self.out.clear();
        r
    }

    /// The next reply.
    pub fn reply(&mut self) -> Result<Reply, String> {
        loop {
            match decode_reply(&self.inbuf).map_err(|e| format!("bad reply: {e}"))? {
                Some((r, used)) => {
                    self.inbuf.drain(..used);
                    return Ok(r);
                }
                None => match self.stream.read(&mut self.chunk) {
                    Ok(0) => return Err("connection closed".into()),
                    Ok(n) => self.inbuf.extend_from_slice(&self.chunk[..n]),
                    Err(e) => return Err(e.to_string()),
                },
            }
        }
    }

    /// Sends one command and reads its reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.push(args);
        self.flush()?;
        self.reply()
    }

    /// `INFO [section]` as text.
    pub fn info(&mut self, section: &str) -> Result<String, String> {
        match self.cmd(&[b"INFO", section.as_bytes()])? {
            Reply::Bulk(Some(v)) => Ok(String::from_utf8_lossy(&v).into_owned()),
            r => Err(format!("INFO: {r:?}")),
        }
    }
}

/// The value of `field:` in an INFO text.
pub fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// An HTTP/1.1 connection to etcd's JSON gateway.
pub struct Http {
    addr: SocketAddr,
    w: TcpStream,
    r: BufReader<TcpStream>,
    /// Content-Length of the response being read.
    pending: Option<usize>,
}

impl Http {
    /// Connects to `addr`; reads wait at most `timeout`.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Http, String> {
        let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        Ok(Http {
            addr,
            w: s,
            r,
            pending: None,
        })
    }

    /// Sets how long a read waits (`None`: for ever).
    pub fn set_timeout(&self, t: Option<Duration>) -> Result<(), String> {
        self.w.set_read_timeout(t).map_err(|e| e.to_string())
    }

    /// Another handle on the socket, to shut it down from another thread
    /// (which ends a blocked read).
    pub fn handle(&self) -> Result<TcpStream, String> {
        self.w.try_clone().map_err(|e| e.to_string())
    }

    /// The server's address.
    pub fn peer(&self) -> Result<SocketAddr, String> {
        Ok(self.addr)
    }

    /// `POST path` with a JSON body; the JSON answer.
    pub fn post(&mut self, path: &str, body: &str) -> Result<serde_json::Value, String> {
        self.send(path, body)?;
        let chunked = self.head()?;
        let body = if chunked {
            let mut all = Vec::new();
            while let Some(c) = self.chunk()? {
                all.extend_from_slice(&c);
            }
            all
        } else {
            self.sized_body()?
        };
        serde_json::from_slice(&body).map_err(|e| format!("bad JSON: {e}"))
    }

    /// Sends `POST path` with a JSON body.
    pub fn send(&mut self, path: &str, body: &str) -> Result<(), String> {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.w.write_all(req.as_bytes()).map_err(|e| e.to_string())
    }

    /// Reads a response's status line and headers: an error unless 200;
    /// whether the body is chunked (else it has a Content-Length, kept for
    /// `Http::sized_body`).
    pub fn head(&mut self) -> Result<bool, String> {
        let mut line = String::new();
        self.r.read_line(&mut line).map_err(|e| e.to_string())?;
        let status = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let (mut len, mut chunked) = (None, false);
        loop {
            line.clear();
            let n = self.r.read_line(&mut line).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("connection closed".into());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "content-length" {
                    len = v.parse::<usize>().ok();
                } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                }
            }
        }
        if status != "200" {
            let body = if chunked {
                self.chunk()?.unwrap_or_default()
            } else {
                self.pending = len;
                self.sized_body()?
            };
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ));
        }
        self.pending = len;
        Ok(chunked)
    }

    /// The next chunk of a chunked body (`None` after the last).
    pub fn chunk(&mut self) -> Result<Option<Vec<u8>>, String> {
        let mut line = String::new();
        let n = self.r.read_line(&mut line).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed".into());
        }
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|_| format!("bad chunk size {line:?}"))?;
        if size > 64 << 20 {
            return Err(format!("chunk of {size} bytes"));
        }
        let mut c = vec![0u8; size + 2];
        self.r.read_exact(&mut c).map_err(|e| e.to_string())?;
        if size == 0 {
            return Ok(None);
        }
        c.truncate(size);
        Ok(Some(c))
    }

    fn sized_body(&mut self) -> Result<Vec<u8>, String> {
        let n = self.pending.take().ok_or("response without length")?;
        if n > 64 << 20 {
            return Err(format!("body of {n} bytes"));
        }
        let mut body = vec![0u8; n];
        self.r.read_exact(&mut body).map_err(|e| e.to_string())?;
        Ok(body)
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64 (padding optional); `None` on a byte outside
/// the alphabet or a length no encoding has.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s {
        let v = B64.iter().position(|&x| x == c)? as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_known_vectors_both_ways() {
        let cases: [(&[u8], &str); 6] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foobar", "Zm9vYmFy"),
            (b"kvbench:l:17", "a3ZiZW5jaDpsOjE3"),
        ];
        for (plain, enc) in cases {
            assert_eq!(base64(plain), enc);
            assert_eq!(base64_decode(enc).as_deref(), Some(plain), "{enc}");
        }
        for bad in ["a", "Zm9v!", "Z", "ab*d"] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn info_fields() {
        let info = "# Stats\r\nxlane_leader_term:7\r\nrole:slave\r\n";
        assert_eq!(info_field(info, "xlane_leader_term"), Some("7"));
        assert_eq!(info_field(info, "role"), Some("slave"));
        assert_eq!(info_field(info, "rol"), None);
    }
}
