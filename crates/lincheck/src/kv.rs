//! A key-value model with Redis semantics for `GET`, `SET`, `INCRBY` and `DEL`,
//! partitioned per key.

use std::fmt;

use crate::check::Model;

/// What a key-value operation does.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum KvCall {
    /// `GET key`.
    Get,
    /// `SET key value`.
    Put(Vec<u8>),
    /// `INCRBY key delta` (a missing key counts as 0; a non-integer value or an overflow
    /// is an error and leaves the value unchanged).
    Incr(i64),
    /// `DEL key`.
    Delete,
}

/// A key-value operation's input.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KvInput {
    /// The key (the partition).
    pub key: Vec<u8>,
    /// The call.
    pub call: KvCall,
}

impl KvInput {
    /// `GET key`.
    pub fn get(key: impl Into<Vec<u8>>) -> Self {
        KvInput {
            key: key.into(),
            call: KvCall::Get,
        }
    }
    /// `SET key value`.
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        KvInput {
            key: key.into(),
            call: KvCall::Put(value.into()),
        }
    }
    /// `INCRBY key delta`.
    pub fn incr(key: impl Into<Vec<u8>>, delta: i64) -> Self {
        KvInput {
            key: key.into(),
            call: KvCall::Incr(delta),
        }
    }
    /// `DEL key`.
    pub fn delete(key: impl Into<Vec<u8>>) -> Self {
        KvInput {
            key: key.into(),
            call: KvCall::Delete,
        }
    }
}

/// A key-value operation's output.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum KvOutput {
    /// `SET` succeeded.
    Ok,
    /// `GET` result (`None` = nil).
    Value(Option<Vec<u8>>),
    /// `INCRBY` result: the new value.
    Int(i64),
    /// `DEL` result: number of keys removed (0 or 1).
    Count(u64),
    /// `INCRBY` on a non-integer value or overflow.
    Error,
}

/// The sequential key-value specification. State per key: its value (`None` = absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KvModel;

/// Parses a decimal `i64` as Redis does for `INCR` (no sign `+`, no spaces, no leading
/// zeros except `0` itself).
pub fn parse_int(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || s == "-0"
    {
        return None;
    }
    s.parse().ok()
}

impl Model for KvModel {
    type Key = Vec<u8>;
    type State = Option<Vec<u8>>;
    type Input = KvInput;
    type Output = KvOutput;

    fn partition(&self, input: &KvInput) -> Vec<u8> {
        input.key.clone()
    }

    fn init(&self) -> Self::State {
        None
    }

    fn step(
        &self,
        state: &Self::State,
        input: &KvInput,
        output: Option<&KvOutput>,
    ) -> Option<Self::State> {
        let (next, expect) = match &input.call {
            KvCall::Get => (state.clone(), KvOutput::Value(state.clone())),
            KvCall::Put(v) => (Some(v.clone()), KvOutput::Ok),
            KvCall::Incr(d) => {
                let cur = match state {
                    None => Some(0),
                    Some(b) => parse_int(b),
                };
                match cur.and_then(|c| c.checked_add(*d)) {
                    Some(n) => (Some(n.to_string().into_bytes()), KvOutput::Int(n)),
                    None => (state.clone(), KvOutput::Error),
                }
            }
            KvCall::Delete => (None, KvOutput::Count(u64::from(state.is_some()))),
        };
        match output {
            None => Some(next),
            Some(o) if *o == expect => Some(next),
            Some(_) => None,
        }
    }
}

/// Byte strings shown as (lossy) UTF-8 in quotes.
struct Text<'a>(&'a [u8]);

impl fmt::Debug for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.0))
    }
}

impl fmt::Debug for KvCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvCall::Get => write!(f, "get"),
            KvCall::Put(v) => write!(f, "put {:?}", Text(v)),
            KvCall::Incr(d) => write!(f, "incr {d}"),
            KvCall::Delete => write!(f, "del"),
        }
    }
}

impl fmt::Debug for KvInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {:?}", self.call, Text(&self.key))
    }
}

impl fmt::Debug for KvOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvOutput::Ok => write!(f, "OK"),
            KvOutput::Value(None) => write!(f, "nil"),
            KvOutput::Value(Some(v)) => write!(f, "{:?}", Text(v)),
            KvOutput::Int(i) => write!(f, "(integer) {i}"),
            KvOutput::Count(n) => write!(f, "(deleted) {n}"),
            KvOutput::Error => write!(f, "ERR"),
        }
    }
}
