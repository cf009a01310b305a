//! `BITOP`: `AND`, `OR`, `XOR`, `NOT` over whole strings.

use super::args::{arity_error, is_word, word, BitsError};

/// A `BITOP` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitopKind {
    /// `AND`.
    And,
    /// `OR`.
    Or,
    /// `XOR`.
    Xor,
    /// `NOT` (one source).
    Not,
}

/// The arguments of `BITOP op destkey srckey...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitopArgs {
    /// The operation.
    pub op: BitopKind,
    /// The destination key.
    pub dest: Vec<u8>,
    /// The source keys (at least one; exactly one for `NOT`).
    pub sources: Vec<Vec<u8>>,
}

/// `BITOP op destkey srckey...`: parses `words` (errors: `Syntax` for an
/// unknown operation, then `BitopNot`). The caller then looks the sources
/// up (any non-string: `WRONGTYPE`; the destination's type does not
/// matter, it is overwritten) and calls [`bitop`].
pub fn parse_bitop(words: &[Vec<u8>]) -> Result<BitopArgs, BitsError> {
    if words.len() < 4 {
        return Err(arity_error(words, "bitop"));
    }
    let name = word(words, 1, "bitop")?;
    let op = if is_word(name, "and") {
        BitopKind::And
    } else if is_word(name, "or") {
        BitopKind::Or
    } else if is_word(name, "xor") {
        BitopKind::Xor
    } else if is_word(name, "not") {
        BitopKind::Not
    } else {
        return Err(BitsError::Syntax);
    };
    if op == BitopKind::Not && words.len() != 4 {
        return Err(BitsError::BitopNot);
    }
    Ok(BitopArgs {
        op,
        dest: word(words, 2, "bitop")?.to_vec(),
        sources: words.get(3..).unwrap_or_default().to_vec(),
    })
}

/// `BITOP`: the result of `op` over `sources` (a missing key is an empty
/// string), as long as the longest source, shorter ones zero-padded.
/// The reply is its length; an empty result deletes the destination key
/// (signal it modified only if it existed), otherwise it is stored there.
pub fn bitop(op: BitopKind, sources: &[&[u8]]) -> Vec<u8> {
    let len = sources.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        let at = |s: &&[u8]| s.get(i).copied().unwrap_or(0);
        let mut it = sources.iter();
        let mut acc = it.next().map(at).unwrap_or(0);
        match op {
            BitopKind::Not => acc = !acc,
            BitopKind::And => it.for_each(|s| acc &= at(s)),
            BitopKind::Or => it.for_each(|s| acc |= at(s)),
            BitopKind::Xor => it.for_each(|s| acc ^= at(s)),
        }
        out.push(acc);
    }
    out
}
