//! The primitive field codec ([`Writer`], [`Reader`]; also used by
//! [`crate::store`] for journal records) and the encodings of the small
//! field types.

use super::msg::*;
use xlane_te::Resources;

/// Appends big-endian fields to a buffer.
pub(crate) struct Writer<'a> {
    pub(crate) out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    pub(crate) fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.out.push(u8::from(v));
    }
    pub(crate) fn bytes32(&mut self, v: &[u8; 32]) {
        self.out.extend_from_slice(v);
    }
    pub(crate) fn str(
        &mut self,
        field: &'static str,
        v: &str,
        max: usize,
    ) -> Result<(), EncodeError> {
        if v.len() > max {
            return Err(EncodeError::TooLong { field });
        }
        self.u16(v.len() as u16);
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
    pub(crate) fn count(
        &mut self,
        field: &'static str,
        n: usize,
        max: usize,
    ) -> Result<(), EncodeError> {
        if n > max || n > u16::MAX as usize {
            return Err(EncodeError::TooLong { field });
        }
        self.u16(n as u16);
        Ok(())
    }
    pub(crate) fn strs(
        &mut self,
        field: &'static str,
        v: &[String],
        max: usize,
    ) -> Result<(), EncodeError> {
        self.count(field, v.len(), max)?;
        for s in v {
            self.str(field, s, MAX_NAME)?;
        }
        Ok(())
    }
    pub(crate) fn resources(&mut self, r: &Resources) {
        self.u32(r.load_bytes);
        self.u64(r.period_ns);
        self.u64(r.min_latency_ns);
        self.u64(r.max_jitter_ns);
    }
}

/// Reads big-endian fields from a slice; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    /// The bytes not read yet (all consumed).
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.pos.min(self.buf.len())..];
        self.pos = self.buf.len();
        r
    }
    /// The next `n` bytes.
    pub(crate) fn take_bytes(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        self.take(n)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        let end = self.pos.checked_add(n).ok_or(ProtoError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(ProtoError::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, ProtoError> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, ProtoError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, ProtoError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, ProtoError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    pub(crate) fn bool(&mut self, field: &'static str) -> Result<bool, ProtoError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ProtoError::FieldOutOfRange { field }),
        }
    }
    pub(crate) fn bytes32(&mut self) -> Result<[u8; 32], ProtoError> {
        self.array()
    }
    pub(crate) fn str(&mut self, field: &'static str, max: usize) -> Result<String, ProtoError> {
        let n = self.u16()? as usize;
        if n > max {
            return Err(ProtoError::FieldOutOfRange { field });
        }
        let b = self.take(n)?;
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| ProtoError::BadUtf8 { field })
    }
    pub(crate) fn count(&mut self, field: &'static str, max: usize) -> Result<usize, ProtoError> {
        let n = self.u16()? as usize;
        if n > max {
            return Err(ProtoError::FieldOutOfRange { field });
        }
        Ok(n)
    }
    pub(crate) fn strs(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<Vec<String>, ProtoError> {
        let n = self.count(field, max)?;
        let mut v = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            v.push(self.str(field, MAX_NAME)?);
        }
        Ok(v)
    }
    pub(crate) fn resources(&mut self) -> Result<Resources, ProtoError> {
        Ok(Resources {
            load_bytes: self.u32()?,
            period_ns: self.u64()?,
            min_latency_ns: self.u64()?,
            max_jitter_ns: self.u64()?,
        })
    }
    pub(crate) fn finish(&self) -> Result<(), ProtoError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            n => Err(ProtoError::TrailingBytes(n)),
        }
    }
}

pub(super) fn ids(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<TunnelId>, ProtoError> {
    let n = r.count(field, MAX_TUNNEL_IDS)?;
    let mut v = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        v.push(TunnelId(r.u64()?));
    }
    Ok(v)
}

pub(super) fn put_ids(
    w: &mut Writer<'_>,
    field: &'static str,
    v: &[TunnelId],
) -> Result<(), EncodeError> {
    w.count(field, v.len(), MAX_TUNNEL_IDS)?;
    for t in v {
        w.u64(t.0);
    }
    Ok(())
}

impl Reason {
    pub(super) fn to_u8(self) -> u8 {
        match self {
            Reason::Te => 1,
            Reason::BwExceeded => 2,
            Reason::BwUnused => 3,
        }
    }
    pub(super) fn from_u8(v: u8) -> Result<Reason, ProtoError> {
        match v {
            1 => Ok(Reason::Te),
            2 => Ok(Reason::BwExceeded),
            3 => Ok(Reason::BwUnused),
            _ => Err(ProtoError::FieldOutOfRange { field: "reason" }),
        }
    }
}

impl TerminateReason {
    pub(super) fn to_u8(self) -> u8 {
        match self {
            TerminateReason::BwExceeded => 1,
            TerminateReason::BwUnused => 2,
            TerminateReason::Unknown => 3,
        }
    }
    pub(super) fn from_u8(v: u8) -> Result<TerminateReason, ProtoError> {
        match v {
            1 => Ok(TerminateReason::BwExceeded),
            2 => Ok(TerminateReason::BwUnused),
            3 => Ok(TerminateReason::Unknown),
            _ => Err(ProtoError::FieldOutOfRange { field: "reason" }),
        }
    }
}

impl TunnelState {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            TunnelState::Active => 1,
            TunnelState::Unbounded => 2,
        }
    }
    pub(crate) fn from_u8(v: u8) -> Result<TunnelState, ProtoError> {
        match v {
            1 => Ok(TunnelState::Active),
            2 => Ok(TunnelState::Unbounded),
            _ => Err(ProtoError::FieldOutOfRange { field: "state" }),
        }
    }
}
