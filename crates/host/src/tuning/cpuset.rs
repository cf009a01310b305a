//! Sets of CPU numbers and the two text forms the kernel uses for them:
//! the list form (`0-3,8`, as in `smp_affinity_list`, `isolated`,
//! `nohz_full`) and the hexadecimal mask form (`ff,00000003`, as in
//! `smp_affinity`, `rps_cpus`, `xps_cpus`).

use std::collections::BTreeSet;
use std::fmt;

/// The largest CPU number accepted by the parsers (exclusive). Inputs naming
/// CPUs beyond it are rejected rather than expanded, so a hostile or corrupt
/// file cannot make a parser allocate without bound.
pub const MAX_CPUS: usize = 8192;

/// Why a CPU list or mask could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetParseError {
    /// A token is not a number or a range of numbers.
    #[error("bad cpu list token {0:?}")]
    BadToken(String),
    /// A range runs backwards (`5-3`).
    #[error("cpu range {0}-{1} runs backwards")]
    Backwards(usize, usize),
    /// A CPU number is at or above [`MAX_CPUS`].
    #[error("cpu {0} is beyond the supported maximum")]
    TooLarge(usize),
    /// A mask group is not hexadecimal or has more than 8 digits.
    #[error("bad hex mask group {0:?}")]
    BadMaskGroup(String),
}

/// An ordered set of CPU numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet(BTreeSet<usize>);

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set holding one CPU.
    pub fn single(cpu: usize) -> Self {
        let mut s = Self::new();
        s.0.insert(cpu);
        s
    }

    /// Parses the list form: comma-separated numbers and inclusive ranges
    /// (`0-3,8,10-11`). Whitespace around the text is ignored; empty text and
    /// the kernel's `(null)` give the empty set.
    pub fn parse_list(text: &str) -> Result<Self, CpuSetParseError> {
        let text = text.trim();
        let mut set = Self::new();
        if text.is_empty() || text == "(null)" {
            return Ok(set);
        }
        for tok in text.split(',') {
            let tok = tok.trim();
            if tok.is_empty() {
                continue;
            }
            let (a, b) = match tok.split_once('-') {
                Some((a, b)) => (parse_cpu(a, tok)?, parse_cpu(b, tok)?),
                None => {
                    let a = parse_cpu(tok, tok)?;
                    (a, a)
                }
            };
            if b < a {
                return Err(CpuSetParseError::Backwards(a, b));
            }
            set.0.extend(a..=b);
        }
        Ok(set)
    }

    /// Parses the hexadecimal mask form: comma-separated groups of up to 8
    /// hex digits, most significant group first (`ff,00000003`).
    pub fn parse_mask(text: &str) -> Result<Self, CpuSetParseError> {
        let text = text.trim();
        let mut set = Self::new();
        if text.is_empty() {
            return Ok(set);
        }
        let groups: Vec<&str> = text.split(',').collect();
        let n = groups.len();
        if n * 32 > MAX_CPUS {
            return Err(CpuSetParseError::TooLarge(n * 32));
        }
        for (i, g) in groups.iter().enumerate() {
            let g = g.trim();
            if g.is_empty() || g.len() > 8 {
                return Err(CpuSetParseError::BadMaskGroup(g.to_string()));
            }
            let bits = u32::from_str_radix(g, 16)
                .map_err(|_| CpuSetParseError::BadMaskGroup(g.to_string()))?;
            let base = (n - 1 - i) * 32;
            for bit in 0..32 {
                if bits & (1u32 << bit) != 0 {
                    set.0.insert(base + bit);
                }
            }
        }
        Ok(set)
    }

    /// The list form, e.g. `0-3,8`; empty for the empty set.
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }

    /// The hexadecimal mask form: the most significant group without
    /// leading zeros, the others padded to 8 digits (`1,00000003`); `0` for
    /// the empty set.
    pub fn to_mask(&self) -> String {
        let Some(&max) = self.0.iter().next_back() else {
            return "0".to_string();
        };
        let ngroups = max / 32 + 1;
        let mut groups = vec![0u32; ngroups];
        for &cpu in &self.0 {
            groups[cpu / 32] |= 1u32 << (cpu % 32);
        }
        let mut out = String::new();
        for (i, g) in groups.iter().rev().enumerate() {
            if i == 0 {
                out.push_str(&format!("{g:x}"));
            } else {
                out.push_str(&format!(",{g:08x}"));
            }
        }
        out
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        self.0.contains(&cpu)
    }

    /// Adds `cpu`; returns whether it was new.
    pub fn insert(&mut self, cpu: usize) -> bool {
        self.0.insert(cpu)
    }

    /// Removes `cpu`; returns whether it was present.
    pub fn remove(&mut self, cpu: usize) -> bool {
        self.0.remove(&cpu)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    /// The CPUs of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    /// The CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().copied()
    }

    /// The highest CPU number, if any.
    pub fn last(&self) -> Option<usize> {
        self.0.iter().next_back().copied()
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

fn parse_cpu(s: &str, tok: &str) -> Result<usize, CpuSetParseError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuSetParseError::BadToken(tok.to_string()));
    }
    let n: usize = s
        .parse()
        .map_err(|_| CpuSetParseError::BadToken(tok.to_string()))?;
    if n >= MAX_CPUS {
        return Err(CpuSetParseError::TooLarge(n));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trips() {
        let cases: &[(&str, &[usize], &str)] = &[
            ("", &[], ""),
            ("(null)\n", &[], ""),
            ("0", &[0], "0"),
            ("0-1\n", &[0, 1], "0-1"),
            ("0-3,8,10-11", &[0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"),
            ("3,1,2", &[1, 2, 3], "1-3"),
        ];
        for (text, cpus, canon) in cases {
            let s = CpuSet::parse_list(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(s.iter().collect::<Vec<_>>(), *cpus, "{text:?}");
            assert_eq!(s.to_list(), *canon, "{text:?}");
        }
    }

    #[test]
    fn list_rejects_garbage() {
        for text in [
            "a",
            "1-",
            "-1",
            "3-1",
            "1-2-3",
            "99999999999999999999",
            "8192",
        ] {
            assert!(CpuSet::parse_list(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn mask_round_trips() {
        let cases: &[(&str, &[usize], &str)] = &[
            ("0", &[], "0"),
            ("3\n", &[0, 1], "3"),
            ("00000002", &[1], "2"),
            ("1,00000003", &[0, 1, 32], "1,00000003"),
            (
                "ffffffff,ffffffff",
                &(0..64).collect::<Vec<_>>(),
                "ffffffff,ffffffff",
            ),
        ];
        for (text, cpus, canon) in cases {
            let s = CpuSet::parse_mask(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(s.iter().collect::<Vec<_>>(), *cpus, "{text:?}");
            assert_eq!(s.to_mask(), *canon, "{text:?}");
        }
    }

    #[test]
    fn mask_rejects_garbage() {
        for text in ["g", "123456789", "1,,2", ","] {
            assert!(CpuSet::parse_mask(text).is_err(), "{text:?}");
        }
    }
}
