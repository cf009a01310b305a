//! RESP2, the Redis serialization protocol: an incremental sans-IO request
//! parser and the reply encoder.
//!
//! Requests come in two forms, as Redis accepts them:
//! * multibulk: `*<n>\r\n` then `n` bulk strings `$<len>\r\n<bytes>\r\n`
//!   (what every client library, redis-cli and redis-benchmark send);
//! * inline: one line of space-separated words ending in `\n` (optionally
//!   `\r\n`), with `"..."` (C escapes, `\xHH`) and `'...'` quoting as in
//!   `redis-cli`/telnet.
//!
//! The [`Parser`] owns its input buffer: [`Parser::feed`] appends bytes as
//! they arrive, [`Parser::next_command`] yields complete commands one at a
//! time. Every length a client declares is checked against [`Limits`]
//! before any memory is reserved for it, so the buffer never grows past one
//! command (bounded) plus one read. After an error the parser stays failed:
//! the connection must be closed, as Redis does.

use std::fmt;

/// One request: the command name and its arguments, as raw bytes.
pub type Command = Vec<Vec<u8>>;

/// Bounds on what a client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string (Redis' `proto-max-bulk-len`, default 512 MiB).
    pub max_bulk: usize,
    /// Most elements in one multibulk request.
    pub max_array: usize,
    /// Longest inline request or header line, without its `\r\n`.
    pub max_inline: usize,
    /// Largest sum of argument lengths of one request (Redis'
    /// `client-query-buffer-limit`, default 1 GiB).
    pub max_command: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk: 512 << 20,
            max_array: 1 << 20,
            max_inline: 64 << 10,
            max_command: 1 << 30,
        }
    }
}

/// A protocol violation; the connection cannot continue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RespError {
    /// `*<n>` with `n` not an integer, or above [`Limits::max_array`].
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<len>` with `len` not an integer, negative, or above
    /// [`Limits::max_bulk`].
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// An element of a multibulk request did not start with `$`.
    #[error("Protocol error: expected '$', got '{}'", char::from(*.0))]
    ExpectedBulk(u8),
    /// A bulk string was not followed by `\r\n`.
    #[error("Protocol error: expected CRLF after bulk string")]
    MissingCrlf,
    /// A header line or inline request longer than [`Limits::max_inline`].
    #[error("Protocol error: too big inline request")]
    LineTooLong,
    /// The arguments of one request add up to more than
    /// [`Limits::max_command`].
    #[error("Protocol error: request larger than {0} bytes")]
    CommandTooLarge(usize),
    /// An inline request with an unterminated quote, or a closing quote not
    /// followed by a space.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
}

#[derive(Debug)]
enum State {
    /// Between requests.
    Idle,
    /// Inside a multibulk request: `remaining` elements still to read.
    Array {
        remaining: usize,
        args: Command,
        total: usize,
    },
    /// Inside a multibulk request, header `$len` read: waiting for the bytes.
    Bulk {
        len: usize,
        remaining: usize,
        args: Command,
        total: usize,
    },
}

/// The incremental request parser. See the module docs.
#[derive(Debug)]
pub struct Parser {
    limits: Limits,
    buf: Vec<u8>,
    /// Start of the unconsumed input in `buf`.
    pos: usize,
    /// Bytes after `pos` already searched for a newline without success.
    scanned: usize,
    state: State,
    failed: Option<RespError>,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new(Limits::default())
    }
}

impl Parser {
    /// A parser with the given limits.
    pub fn new(limits: Limits) -> Self {
        Parser {
            limits,
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            state: State::Idle,
            failed: None,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        if self.pos > 0 && (self.pos == self.buf.len() || self.pos >= 64 << 10) {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes received but not yet consumed by a complete request or a
    /// completed part of one.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when no request is half-read (a clean point to close).
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Idle) && self.buffered() == 0
    }

    /// The next complete request, `Ok(None)` when more input is needed.
    /// Empty requests (`*0`, `*-1`, blank inline lines) are skipped, as
    /// Redis does. After an error every call returns the same error.
    pub fn next_command(&mut self) -> Result<Option<Command>, RespError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.step() {
            Ok(c) => Ok(c),
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Finds the next `\n` after `pos`; returns the line (without `\n`)
    /// bounds, or `None` when incomplete. Lines longer than `max_inline`
    /// (plus the optional `\r`) are an error whether or not their end has
    /// arrived, so that the outcome does not depend on how input is split.
    fn line(&mut self) -> Result<Option<(usize, usize)>, RespError> {
        let avail = &self.buf[self.pos..];
        let limit = self.limits.max_inline + 1; // room for the '\r'
        let from = self.scanned.min(avail.len());
        match avail[from..].iter().position(|&b| b == b'\n') {
            Some(i) => {
                let end = from + i;
                if end > limit {
                    return Err(RespError::LineTooLong);
                }
                self.scanned = 0;
                Ok(Some((self.pos, self.pos + end)))
            }
            None => {
                if avail.len() > limit {
                    return Err(RespError::LineTooLong);
                }
                self.scanned = avail.len();
                Ok(None)
            }
        }
    }

    /// A whole multibulk request already in the buffer at `pos`, read in
    /// one pass (the common case of pipelined input): the words and the
    /// bytes it takes. `None` when it is incomplete, empty, past a limit or
    /// malformed in any way: the state machine then reads it, and reports
    /// what is wrong exactly as for input split anywhere.
    fn whole(&self) -> Option<(Command, usize)> {
        let b = &self.buf[self.pos..];
        // `<tag><count>\r\n` at `b[at..]`: the count and where the line
        // ends. Only the form every client sends is read here: one to ten
        // digits, no leading zero. Anything else (a sign, a huge or
        // malformed count) is `None`, for the state machine to judge.
        let header = |at: usize, tag: u8| -> Option<(i64, usize)> {
            let h = b.get(at..)?;
            if h.first() != Some(&tag) {
                return None;
            }
            let mut v: i64 = 0;
            let mut i = 1;
            while let Some(&d) = h.get(i) {
                if !d.is_ascii_digit() || i > 10 {
                    break;
                }
                v = v * 10 + i64::from(d - b'0');
                i += 1;
            }
            let leading_zero = h.get(1) == Some(&b'0') && i > 2;
            // The `\n` is at `i + 1`: a line past `max_inline` is the state
            // machine's error to report.
            let too_long = i > self.limits.max_inline;
            if i == 1 || leading_zero || too_long || h.get(i..i + 2)? != b"\r\n" {
                return None;
            }
            Some((v, at + i + 2))
        };
        let (n, mut at) = header(0, b'*')?;
        if n <= 0 || n as u64 > self.limits.max_array as u64 {
            return None;
        }
        let mut args = Vec::with_capacity((n as usize).min(64));
        let mut total = 0usize;
        for _ in 0..n {
            let (len, start) = header(at, b'$')?;
            if len < 0 || len as u64 > self.limits.max_bulk as u64 {
                return None;
            }
            let end = start + len as usize;
            total = total.saturating_add(len as usize);
            if total > self.limits.max_command || b.get(end..end + 2)? != b"\r\n" {
                return None;
            }
            args.push(b[start..end].to_vec());
            at = end + 2;
        }
        Some((args, at))
    }

    fn step(&mut self) -> Result<Option<Command>, RespError> {
        if matches!(self.state, State::Idle) {
            if let Some((args, used)) = self.whole() {
                self.pos += used;
                self.scanned = 0;
                return Ok(Some(args));
            }
        }
        loop {
            match std::mem::replace(&mut self.state, State::Idle) {
                State::Idle => {
                    if self.pos == self.buf.len() {
                        return Ok(None);
                    }
                    if self.buf[self.pos] == b'*' {
                        let Some((s, e)) = self.line()? else {
                            return Ok(None);
                        };
                        let n = parse_header_int(&self.buf[s + 1..e])
                            .ok_or(RespError::InvalidMultibulkLength)?;
                        self.pos = e + 1;
                        if n <= 0 {
                            continue; // an empty request: ignored
                        }
                        if n as u64 > self.limits.max_array as u64 {
                            return Err(RespError::InvalidMultibulkLength);
                        }
                        let n = n as usize;
                        self.state = State::Array {
                            remaining: n,
                            args: Vec::with_capacity(n.min(64)),
                            total: 0,
                        };
                    } else {
                        let Some((s, e)) = self.line()? else {
                            return Ok(None);
                        };
                        let mut line_end = e;
                        if line_end > s && self.buf[line_end - 1] == b'\r' {
                            line_end -= 1;
                        }
                        if line_end - s > self.limits.max_inline {
                            return Err(RespError::LineTooLong);
                        }
                        let args = split_inline(&self.buf[s..line_end])?;
                        self.pos = e + 1;
                        if args.is_empty() {
                            continue;
                        }
                        return Ok(Some(args));
                    }
                }
                State::Array {
                    remaining,
                    args,
                    total,
                } => {
                    if remaining == 0 {
                        return Ok(Some(args));
                    }
                    if self.pos == self.buf.len() {
                        self.state = State::Array {
                            remaining,
                            args,
                            total,
                        };
                        return Ok(None);
                    }
                    let first = self.buf[self.pos];
                    if first != b'$' {
                        return Err(RespError::ExpectedBulk(first));
                    }
                    let Some((s, e)) = self.line()? else {
                        self.state = State::Array {
                            remaining,
                            args,
                            total,
                        };
                        return Ok(None);
                    };
                    let len = parse_header_int(&self.buf[s + 1..e])
                        .ok_or(RespError::InvalidBulkLength)?;
                    if len < 0 || len as u64 > self.limits.max_bulk as u64 {
                        return Err(RespError::InvalidBulkLength);
                    }
                    let len = len as usize;
                    let total = total.saturating_add(len);
                    if total > self.limits.max_command {
                        return Err(RespError::CommandTooLarge(self.limits.max_command));
                    }
                    self.pos = e + 1;
                    self.state = State::Bulk {
                        len,
                        remaining: remaining - 1,
                        args,
                        total,
                    };
                }
                State::Bulk {
                    len,
                    remaining,
                    mut args,
                    total,
                } => {
                    let avail = self.buf.len() - self.pos;
                    // Check the terminator as soon as it is there, so that an
                    // error does not depend on how the input is split.
                    if avail > len && self.buf[self.pos + len] != b'\r' {
                        return Err(RespError::MissingCrlf);
                    }
                    if avail < len + 2 {
                        self.state = State::Bulk {
                            len,
                            remaining,
                            args,
                            total,
                        };
                        return Ok(None);
                    }
                    if self.buf[self.pos + len + 1] != b'\n' {
                        return Err(RespError::MissingCrlf);
                    }
                    args.push(self.buf[self.pos..self.pos + len].to_vec());
                    self.pos += len + 2;
                    self.state = State::Array {
                        remaining,
                        args,
                        total,
                    };
                }
            }
        }
    }
}

/// A header integer (`*n` or `$n`): optional `-`, digits, then `\r`
/// (the line ends in `\r\n`). Returns `None` on anything else.
fn parse_header_int(b: &[u8]) -> Option<i64> {
    let b = b.strip_suffix(b"\r")?;
    parse_i64_strict(b)
}

/// Parses an integer exactly as Redis' `string2ll`: optional `-`, no `+`,
/// no spaces, no leading zeros, and within `i64`.
pub fn parse_i64_strict(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Splits an inline request into words, with redis-cli's quoting rules.
pub fn split_inline(line: &[u8]) -> Result<Command, RespError> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i == n {
            return Ok(out);
        }
        let mut word = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i == n {
                    return Err(RespError::UnbalancedQuotes);
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex_val(line[i + 2]), hex_val(line[i + 3])) {
                        word.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    i += 1;
                    word.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return Err(RespError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else {
                    word.push(c);
                }
                i += 1;
            } else if in_sq {
                if i == n {
                    return Err(RespError::UnbalancedQuotes);
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    word.push(b'\'');
                    i += 2;
                    continue;
                } else if c == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return Err(RespError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else {
                    word.push(c);
                }
                i += 1;
            } else {
                if i == n {
                    break;
                }
                match line[i] {
                    c if is_space(c) => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => word.push(c),
                }
                i += 1;
            }
        }
        out.push(word);
    }
}

/// Encodes a request as a multibulk array of bulk strings (what clients
/// send).
pub fn encode_command(args: &[Vec<u8>], out: &mut Vec<u8>) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        write_bulk(a, out);
    }
}

/// Writes a RESP header line, `<kind><n>\r\n` (e.g. `*3\r\n`, `$5\r\n`, `:-7\r\n`),
/// without allocating.
pub fn write_header(kind: u8, n: i64, out: &mut Vec<u8>) {
    out.reserve(24);
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut m = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    out.push(kind);
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

/// Writes a bulk string (`$<len>\r\n<bytes>\r\n`).
pub fn write_bulk(b: &[u8], out: &mut Vec<u8>) {
    out.reserve(b.len() + 26);
    write_header(b'$', b.len() as i64, out);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A reply, in RESP2's types and the three RESP3 adds for xlane kv's
/// commands (map, set, double). [`Reply::encode`] writes RESP2 (a map or a
/// set as an array, a double as a bulk string); [`Reply::encode_resp3`]
/// writes RESP3 (nil as `_`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`: a status line (no `\r` or `\n` inside).
    Simple(String),
    /// `-ERR ...`: an error line, its first word the error code.
    Error(String),
    /// `:42`.
    Integer(i64),
    /// `$3\r\nfoo`, or `$-1` for `None` (nil).
    Bulk(Option<Vec<u8>>),
    /// `*2 ...`, or `*-1` for `None` (nil array).
    Array(Option<Vec<Reply>>),
    /// RESP3 `%2 ...`: field/value pairs (RESP2: a flat array).
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~2 ...` (RESP2: an array).
    Set(Vec<Reply>),
    /// RESP3 `,1.5`: a double in Redis' text (`%.17g`, `inf`, `-inf`;
    /// RESP2: a bulk string).
    Double(String),
    /// RESP3 `#t`/`#f` (RESP2: `:1`/`:0`).
    Bool(bool),
    /// RESP3 `(123...`: a big number's digits (RESP2: a bulk string).
    Bignum(String),
    /// RESP3 `=`: a verbatim string, its format (3 letters) and text
    /// (RESP2: a bulk string of the text).
    Verbatim(String, String),
    /// RESP3 `|`: attributes, then the reply they describe (RESP2: the
    /// reply alone).
    Attribute(Vec<(Reply, Reply)>, Box<Reply>),
    /// RESP3 `>`: an out-of-band push (RESP2: an array).
    Push(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// The nil bulk string.
    pub fn nil() -> Reply {
        Reply::Bulk(None)
    }

    /// A bulk string.
    pub fn bulk(b: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(Some(b.into()))
    }

    /// An error reply; `msg` starts with its code (`ERR ...`).
    pub fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }

    /// True for [`Reply::Error`].
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the wire form. Line breaks inside simple strings and errors
    /// are replaced by spaces so the framing cannot break.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => line(b'+', s, out),
            Reply::Error(s) => line(b'-', s, out),
            Reply::Integer(i) => write_header(b':', *i, out),
            Reply::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
            Reply::Bulk(Some(b)) => write_bulk(b, out),
            Reply::Array(None) => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(Some(items)) | Reply::Set(items) => {
                write_header(b'*', items.len() as i64, out);
                for i in items {
                    i.encode(out);
                }
            }
            Reply::Map(pairs) => {
                write_header(b'*', 2 * pairs.len() as i64, out);
                for (k, v) in pairs {
                    k.encode(out);
                    v.encode(out);
                }
            }
            Reply::Double(d) | Reply::Bignum(d) | Reply::Verbatim(_, d) => {
                write_bulk(d.as_bytes(), out)
            }
            Reply::Bool(b) => write_header(b':', i64::from(*b), out),
            Reply::Attribute(_, r) => r.encode(out),
            Reply::Push(items) => {
                write_header(b'*', items.len() as i64, out);
                for i in items {
                    i.encode(out);
                }
            }
        }
    }

    /// Appends the RESP3 wire form (`HELLO 3` connections).
    pub fn encode_resp3(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Bulk(None) | Reply::Array(None) => out.extend_from_slice(b"_\r\n"),
            Reply::Array(Some(items)) => {
                write_header(b'*', items.len() as i64, out);
                for i in items {
                    i.encode_resp3(out);
                }
            }
            Reply::Set(items) => {
                write_header(b'~', items.len() as i64, out);
                for i in items {
                    i.encode_resp3(out);
                }
            }
            Reply::Map(pairs) => {
                write_header(b'%', pairs.len() as i64, out);
                for (k, v) in pairs {
                    k.encode_resp3(out);
                    v.encode_resp3(out);
                }
            }
            Reply::Double(d) => line(b',', d, out),
            Reply::Bool(b) => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bignum(d) => line(b'(', d, out),
            Reply::Verbatim(fmt, text) => {
                let body = format!("{fmt}:{text}");
                write_header(b'=', body.len() as i64, out);
                out.extend_from_slice(body.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Attribute(attrs, r) => {
                write_header(b'|', attrs.len() as i64, out);
                for (k, v) in attrs {
                    k.encode_resp3(out);
                    v.encode_resp3(out);
                }
                r.encode_resp3(out);
            }
            Reply::Push(items) => {
                write_header(b'>', items.len() as i64, out);
                for i in items {
                    i.encode_resp3(out);
                }
            }
            Reply::Simple(_) | Reply::Error(_) | Reply::Integer(_) | Reply::Bulk(Some(_)) => {
                self.encode(out)
            }
        }
    }

    /// The wire form as a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v);
        v
    }
}

fn line(prefix: u8, s: &str, out: &mut Vec<u8>) {
    out.push(prefix);
    out.extend(
        s.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Why a reply could not be decoded ([`decode_reply`], the client side).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyDecodeError {
    /// The first byte is not a RESP2 or RESP3 type byte.
    #[error("unknown reply type byte {0:#04x}")]
    UnknownType(u8),
    /// A length or integer that does not parse.
    #[error("bad integer in reply")]
    BadInteger,
    /// A bulk string not followed by `\r\n`, or a line without `\r`.
    #[error("bad reply framing")]
    Framing,
    /// Nesting deeper than 32 levels.
    #[error("reply nested too deeply")]
    TooDeep,
}

impl fmt::Display for Reply {
    /// The way `redis-cli` prints a reply without a terminal (`--no-raw`
    /// style is not reproduced; this is for logs and tests).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Simple(s) => write!(f, "{s}"),
            Reply::Error(s) => write!(f, "(error) {s}"),
            Reply::Integer(i) => write!(f, "(integer) {i}"),
            Reply::Bulk(None) | Reply::Array(None) => write!(f, "(nil)"),
            Reply::Bulk(Some(b)) => write!(f, "\"{}\"", String::from_utf8_lossy(b)),
            Reply::Array(Some(items)) | Reply::Set(items) => {
                write!(f, "[")?;
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{it}")?;
                }
                write!(f, "]")
            }
            Reply::Map(pairs) => {
                write!(f, "{{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                write!(f, "}}")
            }
            Reply::Double(d) => write!(f, "(double) {d}"),
            Reply::Bool(b) => write!(f, "({b})"),
            Reply::Bignum(d) => write!(f, "(big number) {d}"),
            Reply::Verbatim(_, t) => write!(f, "\"{t}\""),
            Reply::Attribute(_, r) => write!(f, "{r}"),
            Reply::Push(items) => write!(f, "{}", Reply::Array(Some(items.clone()))),
        }
    }
}

/// Decodes one reply from the front of `buf` (client side, used by tests
/// and tools): `Ok(None)` when incomplete, else the reply and the bytes it
/// took.
pub fn decode_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, ReplyDecodeError> {
    decode_at(buf, 0, 0)
}

fn decode_at(
    buf: &[u8],
    at: usize,
    depth: usize,
) -> Result<Option<(Reply, usize)>, ReplyDecodeError> {
    if depth > 32 {
        return Err(ReplyDecodeError::TooDeep);
    }
    let Some(&t) = buf.get(at) else {
        return Ok(None);
    };
    let Some(nl) = buf[at..].iter().position(|&b| b == b'\n') else {
        return Ok(None);
    };
    let line_end = at + nl;
    if nl < 2 || buf[line_end - 1] != b'\r' {
        return Err(ReplyDecodeError::Framing);
    }
    let body = &buf[at + 1..line_end - 1];
    let next = line_end + 1;
    let text = || String::from_utf8_lossy(body).into_owned();
    let int = || parse_i64_strict(body).ok_or(ReplyDecodeError::BadInteger);
    match t {
        b'+' => Ok(Some((Reply::Simple(text()), next))),
        b'-' => Ok(Some((Reply::Error(text()), next))),
        b':' => Ok(Some((Reply::Integer(int()?), next))),
        // RESP3 verbatim string (`=<len>\r\ntxt:...`): its text, as a
        // bulk string.
        b'$' | b'=' => {
            let n = int()?;
            if n < 0 {
                return Ok(Some((Reply::Bulk(None), next)));
            }
            let n = n as usize;
            let end = next.checked_add(n).ok_or(ReplyDecodeError::BadInteger)?;
            if buf.len() < end.saturating_add(2) {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ReplyDecodeError::Framing);
            }
            let body = &buf[next..end];
            let reply = match (t, body.get(3)) {
                (b'=', Some(b':')) => Reply::Verbatim(
                    String::from_utf8_lossy(&body[..3]).into_owned(),
                    String::from_utf8_lossy(&body[4..]).into_owned(),
                ),
                (b'=', _) => Reply::Bulk(Some(body[n.min(4)..].to_vec())),
                _ => Reply::Bulk(Some(body.to_vec())),
            };
            Ok(Some((reply, end + 2)))
        }
        // RESP3 null, boolean, double, big number.
        b'_' => Ok(Some((Reply::Bulk(None), next))),
        b'#' => match body {
            b"t" => Ok(Some((Reply::Bool(true), next))),
            b"f" => Ok(Some((Reply::Bool(false), next))),
            _ => Err(ReplyDecodeError::Framing),
        },
        b',' => Ok(Some((Reply::Double(text()), next))),
        b'(' => Ok(Some((
            Reply::Bignum(String::from_utf8_lossy(body).into_owned()),
            next,
        ))),
        // Arrays, RESP3 sets and pushes (a push as an array), and maps.
        b'*' | b'~' | b'>' | b'%' => {
            let n = int()?;
            if n < 0 {
                return Ok(Some((Reply::Array(None), next)));
            }
            let count = if t == b'%' { n.saturating_mul(2) } else { n };
            let mut items = Vec::with_capacity((count as usize).min(64));
            let mut pos = next;
            for _ in 0..count {
                match decode_at(buf, pos, depth + 1)? {
                    Some((r, p)) => {
                        items.push(r);
                        pos = p;
                    }
                    None => return Ok(None),
                }
            }
            let reply = match t {
                b'~' => Reply::Set(items),
                b'%' => {
                    let mut it = items.into_iter();
                    let mut pairs = Vec::new();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Reply::Map(pairs)
                }
                _ => Reply::Array(Some(items)),
            };
            Ok(Some((reply, pos)))
        }
        other => Err(ReplyDecodeError::UnknownType(other)),
    }
}

#[cfg(test)]
mod tests;
