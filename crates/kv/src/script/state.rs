//! The replicated part of scripting: the script cache (`EVAL`, `SCRIPT
//! LOAD`) and the function libraries (`FUNCTION LOAD`). Both change only
//! by applied ops, so every member holds the same; both travel in
//! snapshots ([`Scripts::encode`]). Compiled code is not kept here: it is
//! the engine's cache ([`super::engine`]), rebuilt from these bytes.

use imbl::OrdMap;
use std::sync::Arc;

/// A script's SHA1 as Redis names it: 40 lower-case hex digits.
pub type Sha = [u8; 40];

/// The SHA1 of `body` as 40 lower-case hex digits (`SCRIPT LOAD`'s reply,
/// `redis.sha1hex`).
pub fn sha1_hex(body: &[u8]) -> Sha {
    let hex = sha1_smol::Sha1::from(body).digest().to_string();
    let mut out = [0u8; 40];
    out.copy_from_slice(hex.as_bytes());
    out
}

/// A SHA1 as a client wrote it (any case), if it has the shape of one.
pub fn parse_sha(b: &[u8]) -> Option<Sha> {
    if b.len() != 40 || !b.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut out = [0u8; 40];
    for (o, c) in out.iter_mut().zip(b) {
        *o = c.to_ascii_lowercase();
    }
    Some(out)
}

/// The flags a script or function declares (`#!lua flags=...`,
/// `redis.register_function{flags=...}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(u8);

impl Flags {
    /// `no-writes`: the script may not write.
    pub const NO_WRITES: Flags = Flags(1);
    /// `allow-oom`: may run when memory is short.
    pub const ALLOW_OOM: Flags = Flags(2);
    /// `allow-stale`: may run on a stale replica.
    pub const ALLOW_STALE: Flags = Flags(4);
    /// `no-cluster`: refused in cluster mode.
    pub const NO_CLUSTER: Flags = Flags(8);
    /// `allow-cross-slot-keys`.
    pub const ALLOW_CROSS_SLOT: Flags = Flags(16);
    /// A script with a shebang line (flags declared, possibly none): its
    /// flags rule, not the commands it calls.
    pub const DECLARED: Flags = Flags(128);

    const NAMES: [(&'static str, Flags); 5] = [
        ("no-writes", Flags::NO_WRITES),
        ("allow-oom", Flags::ALLOW_OOM),
        ("allow-stale", Flags::ALLOW_STALE),
        ("no-cluster", Flags::NO_CLUSTER),
        ("allow-cross-slot-keys", Flags::ALLOW_CROSS_SLOT),
    ];

    /// The flag named `name`.
    pub fn named(name: &[u8]) -> Option<Flags> {
        Flags::NAMES
            .iter()
            .find(|(n, _)| n.as_bytes() == name)
            .map(|(_, f)| *f)
    }

    /// Whether every bit of `f` is set.
    pub fn has(self, f: Flags) -> bool {
        self.0 & f.0 == f.0
    }

    /// Both sets.
    pub fn with(self, f: Flags) -> Flags {
        Flags(self.0 | f.0)
    }

    /// The names of the flags set, in Redis's order (`FUNCTION LIST`).
    pub fn names(self) -> Vec<&'static str> {
        Flags::NAMES
            .iter()
            .filter(|(_, f)| self.has(*f))
            .map(|(n, _)| *n)
            .collect()
    }

    /// The byte stored in snapshots.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// From [`Flags::bits`].
    pub fn from_bits(b: u8) -> Flags {
        Flags(b)
    }
}

/// One function of a library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionMeta {
    /// Its name (`FCALL name`).
    pub name: Vec<u8>,
    /// `description`, when registered with one.
    pub description: Option<Vec<u8>>,
    /// Its flags.
    pub flags: Flags,
}

/// A function library (`FUNCTION LOAD`): its code and what it registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// The library's name (`#!lua name=...`).
    pub name: Vec<u8>,
    /// The whole code, shebang line included.
    pub code: Vec<u8>,
    /// Its functions, in registration order.
    pub functions: Vec<FunctionMeta>,
}

/// The script cache and the libraries, as replicated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scripts {
    bodies: OrdMap<Sha, Arc<Vec<u8>>>,
    libraries: OrdMap<Vec<u8>, Arc<Library>>,
    /// Function name (lower case: `FCALL` finds a function in any case)
    /// to library name.
    functions: OrdMap<Vec<u8>, Vec<u8>>,
}

/// Why snapshot bytes of the scripts do not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scripts section truncated or malformed")]
pub struct ScriptsDecodeError;

impl Scripts {
    /// Whether nothing is cached or loaded (a fresh server's state).
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty() && self.libraries.is_empty()
    }

    /// The body cached under `sha`.
    pub fn body(&self, sha: &Sha) -> Option<&Arc<Vec<u8>>> {
        self.bodies.get(sha)
    }

    /// Caches `body` under `sha` (its SHA1).
    pub fn cache(&mut self, sha: Sha, body: &[u8]) {
        if !self.bodies.contains_key(&sha) {
            self.bodies.insert(sha, Arc::new(body.to_vec()));
        }
    }

    /// Cached scripts (`INFO`'s `number_of_cached_scripts`).
    pub fn cached(&self) -> usize {
        self.bodies.len()
    }

    /// Empties the script cache (`SCRIPT FLUSH`).
    pub fn flush_cache(&mut self) {
        self.bodies.clear();
    }

    /// The library named `name`.
    pub fn library(&self, name: &[u8]) -> Option<&Arc<Library>> {
        self.libraries.get(name)
    }

    /// Every library, by name.
    pub fn libraries(&self) -> impl Iterator<Item = &Arc<Library>> {
        self.libraries.values()
    }

    /// The library holding function `name`, and the function.
    pub fn function(&self, name: &[u8]) -> Option<(&Arc<Library>, &FunctionMeta)> {
        let lib = self
            .libraries
            .get(self.functions.get(&name.to_ascii_lowercase())?)?;
        let f = lib
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))?;
        Some((lib, f))
    }

    /// The name of a function of `lib` that another library already has.
    pub fn clash<'a>(&self, lib: &'a Library) -> Option<&'a [u8]> {
        lib.functions
            .iter()
            .find_map(|f| match self.functions.get(&f.name.to_ascii_lowercase()) {
                Some(owner) if *owner != lib.name => Some(f.name.as_slice()),
                _ => None,
            })
    }

    /// Adds `lib`, replacing a library of the same name.
    pub fn put_library(&mut self, lib: Library) {
        self.remove_library(&lib.name.clone());
        for f in &lib.functions {
            self.functions
                .insert(f.name.to_ascii_lowercase(), lib.name.clone());
        }
        self.libraries.insert(lib.name.clone(), Arc::new(lib));
    }

    /// Removes library `name`; false if there is none.
    pub fn remove_library(&mut self, name: &[u8]) -> bool {
        let Some(lib) = self.libraries.remove(name) else {
            return false;
        };
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        true
    }

    /// Removes every library (`FUNCTION FLUSH`).
    pub fn flush_libraries(&mut self) {
        self.libraries.clear();
        self.functions.clear();
    }

    /// Functions loaded (`FUNCTION STATS`).
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// Canonical bytes: `count | (sha, body)*` then `count | (name, code,
    /// count | (name, has_desc, desc, flags)*)*`, ordered by key; lengths
    /// are `u64` little-endian.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.bodies.len() as u64);
        for (sha, body) in &self.bodies {
            out.extend_from_slice(sha);
            put_bytes(out, body);
        }
        put_u64(out, self.libraries.len() as u64);
        for lib in self.libraries.values() {
            encode_library(lib, out);
        }
    }

    /// Reads what [`Scripts::encode`] wrote from the front of `b`; returns
    /// the rest.
    pub fn decode(b: &[u8]) -> Result<(Scripts, &[u8]), ScriptsDecodeError> {
        let mut r = Reader(b);
        let mut s = Scripts::default();
        for _ in 0..r.count(40)? {
            let sha = parse_sha(r.take(40)?).ok_or(ScriptsDecodeError)?;
            let body = r.bytes()?;
            s.bodies.insert(sha, Arc::new(body));
        }
        for _ in 0..r.count(16)? {
            let lib = decode_library(&mut r)?;
            if s.clash(&lib).is_some() || s.libraries.contains_key(&lib.name) {
                return Err(ScriptsDecodeError);
            }
            s.put_library(lib);
        }
        Ok((s, r.0))
    }
}

/// A library's bytes (snapshots and `FUNCTION DUMP`).
pub fn encode_library(lib: &Library, out: &mut Vec<u8>) {
    put_bytes(out, &lib.name);
    put_bytes(out, &lib.code);
    put_u64(out, lib.functions.len() as u64);
    for f in &lib.functions {
        put_bytes(out, &f.name);
        match &f.description {
            Some(d) => {
                out.push(1);
                put_bytes(out, d);
            }
            None => out.push(0),
        }
        out.push(f.flags.bits());
    }
}

/// Reads one library written by [`encode_library`].
pub fn decode_library_bytes(b: &[u8]) -> Result<(Library, &[u8]), ScriptsDecodeError> {
    let mut r = Reader(b);
    let lib = decode_library(&mut r)?;
    Ok((lib, r.0))
}

fn decode_library(r: &mut Reader<'_>) -> Result<Library, ScriptsDecodeError> {
    let name = r.bytes()?;
    let code = r.bytes()?;
    let mut functions = Vec::new();
    for _ in 0..r.count(10)? {
        let name = r.bytes()?;
        let description = match r.take(1)?[0] {
            0 => None,
            1 => Some(r.bytes()?),
            _ => return Err(ScriptsDecodeError),
        };
        let flags = Flags::from_bits(r.take(1)?[0]);
        functions.push(FunctionMeta {
            name,
            description,
            flags,
        });
    }
    Ok(Library {
        name,
        code,
        functions,
    })
}

fn put_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ScriptsDecodeError> {
        if self.0.len() < n {
            return Err(ScriptsDecodeError);
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn u64(&mut self) -> Result<u64, ScriptsDecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, ScriptsDecodeError> {
        let n = usize::try_from(self.u64()?).map_err(|_| ScriptsDecodeError)?;
        Ok(self.take(n)?.to_vec())
    }
    /// A count whose items take at least `min` bytes each: refused before
    /// allocating when the input cannot hold it.
    fn count(&mut self, min: usize) -> Result<u64, ScriptsDecodeError> {
        let n = self.u64()?;
        if n.saturating_mul(min as u64) > self.0.len() as u64 {
            return Err(ScriptsDecodeError);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_redis_examples() {
        let cases: [(&[u8], &str); 2] = [
            (b"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            (
                b"Pizza & Mandolino",
                "74822d82031af7493c20eefa13bd07ec4fada82f",
            ),
        ];
        for (body, hex) in cases {
            assert_eq!(&sha1_hex(body)[..], hex.as_bytes());
        }
        assert_eq!(
            parse_sha(b"FD758D1589D044DD850A6F05D52F2EEFD27F033F"),
            parse_sha(b"fd758d1589d044dd850a6f05d52f2eefd27f033f")
        );
        assert_eq!(parse_sha(b"NotValidShaSUM"), None);
    }

    #[test]
    fn scripts_round_trip_and_refuse_damage() {
        let mut s = Scripts::default();
        s.cache(sha1_hex(b"return 1"), b"return 1");
        s.put_library(Library {
            name: b"lib".to_vec(),
            code: b"#!lua name=lib\n".to_vec(),
            functions: vec![FunctionMeta {
                name: b"f".to_vec(),
                description: Some(b"d".to_vec()),
                flags: Flags::NO_WRITES,
            }],
        });
        let mut b = Vec::new();
        s.encode(&mut b);
        let (back, rest) = Scripts::decode(&b).expect("decodes");
        assert!(rest.is_empty());
        assert_eq!(back, s);
        for cut in 0..b.len() {
            assert!(Scripts::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
    }
}
