//! Host authentication: per-host keys and a challenge–response handshake.
//!
//! # Keys file
//!
//! ```toml
//! [hosts]
//! h0 = "3f1c…"   # 64 hex digits: a 32-byte key
//! h1 = "9a07…"
//! ```
//!
//! [`Keys::from_toml`] refuses, with a typed [`KeysError`], a missing
//! `[hosts]` table, a value that is not a string, bad hex, a key that is not
//! 32 bytes, a host named twice, and two hosts sharing one key (either
//! could then speak for the other). `xlane ctl keygen` writes such a file
//! from the system's random source ([`Keys::generate`]).
//!
//! # Handshake
//!
//! The client sends `Hello{host, client_nonce}`, the controller answers
//! `Challenge{server_nonce}` (fresh random bytes per connection), the client
//! answers `Auth{mac}` with
//!
//! ```text
//! mac = HMAC-SHA256(key(host), server_nonce || client_nonce || host)
//! ```
//!
//! and the controller checks it in constant time ([`verify`]). A host name
//! missing from the keys file gets a challenge like any other and fails at
//! the check, so the answer does not tell which names exist. Nonces make
//! every transcript unique: a recorded `Auth` is useless on a new
//! connection. The handshake authenticates the host; the TCP stream is not
//! encrypted or integrity-protected afterwards (the controller network is
//! assumed not to be spoofed by an on-path attacker).
//!
//! # Authorization
//!
//! Enforced by [`crate::core`]: a host requests tunnels only with itself as
//! sender and releases, changes, meters and reconciles only its own tunnels.

use crate::proto::{Mac, Nonce};
use hmac::{Hmac, Mac as _};
use sha2::Sha256;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// A host's 32-byte secret key.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(pub [u8; 32]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

impl Key {
    /// Parse 64 hex digits (either case).
    pub fn from_hex(s: &str) -> Result<Key, HexError> {
        if s.len() != 64 {
            return Err(HexError::Length(s.len()));
        }
        let b = s.as_bytes();
        let mut k = [0u8; 32];
        for (i, out) in k.iter_mut().enumerate() {
            let hi = hex_digit(b[2 * i]).ok_or(HexError::Digit(2 * i))?;
            let lo = hex_digit(b[2 * i + 1]).ok_or(HexError::Digit(2 * i + 1))?;
            *out = hi << 4 | lo;
        }
        Ok(Key(k))
    }

    /// The key as 64 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Why a hex key did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    /// Not 64 characters.
    #[error("expected 64 hex digits, got {0} characters")]
    Length(usize),
    /// A character that is not a hex digit.
    #[error("character {0} is not a hex digit")]
    Digit(usize),
}

/// Why a keys file was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A host appears twice in `[hosts]`.
    #[error("host `{0}` is listed twice")]
    DuplicateHost(String),
    /// Not TOML.
    #[error("keys file TOML: {0}")]
    Toml(#[from] toml::de::Error),
    /// No `[hosts]` table.
    #[error("keys file has no [hosts] table")]
    NoHosts,
    /// A value that is not a string.
    #[error("key of host `{0}` is not a string")]
    NotAString(String),
    /// Bad hex or length.
    #[error("key of host `{host}`: {source}")]
    BadKey {
        /// The host.
        host: String,
        /// What is wrong.
        #[source]
        source: HexError,
    },
    /// Two hosts with the same key.
    #[error("hosts `{0}` and `{1}` have the same key")]
    SharedKey(String, String),
}

/// Why keys could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum KeygenError {
    /// No host names.
    #[error("no host names given")]
    NoHosts,
    /// A name given twice.
    #[error("host `{0}` given twice")]
    DuplicateHost(String),
    /// An empty or over-long name, or one with characters that are not
    /// letters, digits, `-`, `_` or `.`.
    #[error("host name `{0}` is not usable (1..=255 of [A-Za-z0-9._-])")]
    BadName(String),
    /// The random source failed.
    #[error("reading the system random source: {0}")]
    Random(#[from] std::io::Error),
}

/// The keys of all hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys {
    hosts: BTreeMap<String, Key>,
}

/// `n` bytes from the kernel's random source.
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}

fn usable_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= crate::proto::MAX_NAME
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Host names that a line-oriented scan finds in `[hosts]`, to name a
/// duplicate before the TOML parser's generic "duplicate key" message.
fn scan_duplicate(text: &str) -> Option<String> {
    let mut in_hosts = false;
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_hosts = t.trim_start_matches('[').trim_end_matches(']').trim() == "hosts";
            continue;
        }
        if !in_hosts || t.starts_with('#') {
            continue;
        }
        if let Some((k, _)) = t.split_once('=') {
            let k = k.trim().trim_matches('"').to_string();
            if !k.is_empty() && !seen.insert(k.clone()) {
                return Some(k);
            }
        }
    }
    None
}

impl Keys {
    /// Parse a keys file's text.
    pub fn from_toml(text: &str) -> Result<Keys, KeysError> {
        if let Some(h) = scan_duplicate(text) {
            return Err(KeysError::DuplicateHost(h));
        }
        let table: toml::Table = text.parse()?;
        let hosts = table
            .get("hosts")
            .and_then(|v| v.as_table())
            .ok_or(KeysError::NoHosts)?;
        let mut out = BTreeMap::new();
        let mut by_key: BTreeMap<[u8; 32], String> = BTreeMap::new();
        for (host, v) in hosts {
            let s = v
                .as_str()
                .ok_or_else(|| KeysError::NotAString(host.clone()))?;
            let key = Key::from_hex(s).map_err(|source| KeysError::BadKey {
                host: host.clone(),
                source,
            })?;
            if let Some(other) = by_key.insert(key.0, host.clone()) {
                return Err(KeysError::SharedKey(other, host.clone()));
            }
            out.insert(host.clone(), key);
        }
        Ok(Keys { hosts: out })
    }

    /// Read and parse a keys file.
    pub fn from_file(path: &Path) -> Result<Keys, KeysError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeysError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Keys::from_toml(&text)
    }

    /// Fresh random keys for `hosts`.
    pub fn generate<S: AsRef<str>>(hosts: &[S]) -> Result<Keys, KeygenError> {
        if hosts.is_empty() {
            return Err(KeygenError::NoHosts);
        }
        let mut out = BTreeMap::new();
        for h in hosts {
            let h = h.as_ref();
            if !usable_name(h) {
                return Err(KeygenError::BadName(h.to_string()));
            }
            if out.insert(h.to_string(), Key(random_bytes()?)).is_some() {
                return Err(KeygenError::DuplicateHost(h.to_string()));
            }
        }
        Ok(Keys { hosts: out })
    }

    /// Keys from pairs (tests, embedding).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, Key)>) -> Keys {
        Keys {
            hosts: pairs.into_iter().collect(),
        }
    }

    /// The file text, readable by [`Keys::from_toml`].
    pub fn to_toml(&self) -> String {
        let mut s =
            String::from("# xlane controller host keys: keep secret (mode 0600)\n[hosts]\n");
        for (h, k) in &self.hosts {
            s.push_str(&format!("\"{h}\" = \"{}\"\n", k.to_hex()));
        }
        s
    }

    /// A host's key.
    pub fn get(&self, host: &str) -> Option<&Key> {
        self.hosts.get(host)
    }

    /// Host names, sorted.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.hosts.keys().map(String::as_str)
    }

    /// Number of hosts.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Whether there are no hosts.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

fn hmac_of(key: &Key, server_nonce: &Nonce, client_nonce: &Nonce, host: &str) -> Hmac<Sha256> {
    // HMAC accepts keys of any length; 32 bytes never fails.
    let mut m = match <Hmac<Sha256> as hmac::Mac>::new_from_slice(&key.0) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    };
    m.update(server_nonce);
    m.update(client_nonce);
    m.update(host.as_bytes());
    m
}

/// `HMAC-SHA256(key, server_nonce || client_nonce || host)`.
pub fn mac(key: &Key, server_nonce: &Nonce, client_nonce: &Nonce, host: &str) -> Mac {
    hmac_of(key, server_nonce, client_nonce, host)
        .finalize()
        .into_bytes()
        .into()
}

/// Whether `tag` is the right MAC, compared in constant time.
pub fn verify(
    key: &Key,
    server_nonce: &Nonce,
    client_nonce: &Nonce,
    host: &str,
    tag: &Mac,
) -> bool {
    hmac_of(key, server_nonce, client_nonce, host)
        .verify_slice(tag)
        .is_ok()
}

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A message other than the expected step.
    #[error("expected {expected}")]
    OutOfOrder {
        /// The step expected.
        expected: &'static str,
    },
    /// Wrong MAC or unknown host (not distinguished on purpose).
    #[error("authentication failed")]
    Failed,
}

/// The controller side of one connection's handshake (sans-IO).
#[derive(Debug, Clone)]
pub enum Handshake {
    /// Waiting for `Hello`.
    AwaitHello {
        /// The nonce the challenge will carry.
        server_nonce: Nonce,
    },
    /// `Challenge` sent, waiting for `Auth`.
    AwaitAuth {
        /// The claimed host.
        host: String,
        /// Its nonce.
        client_nonce: Nonce,
        /// Ours.
        server_nonce: Nonce,
    },
}

impl Handshake {
    /// A new handshake that will challenge with `server_nonce`.
    pub fn new(server_nonce: Nonce) -> Handshake {
        Handshake::AwaitHello { server_nonce }
    }

    /// `Hello` received: returns the nonce to send in `Challenge`.
    pub fn hello(&mut self, host: &str, client_nonce: Nonce) -> Result<Nonce, AuthError> {
        match self {
            Handshake::AwaitHello { server_nonce } => {
                let n = *server_nonce;
                *self = Handshake::AwaitAuth {
                    host: host.to_string(),
                    client_nonce,
                    server_nonce: n,
                };
                Ok(n)
            }
            Handshake::AwaitAuth { .. } => Err(AuthError::OutOfOrder { expected: "Auth" }),
        }
    }

    /// `Auth` received: the authenticated host name, or why not.
    pub fn auth(&self, keys: &Keys, tag: &Mac) -> Result<String, AuthError> {
        match self {
            Handshake::AwaitHello { .. } => Err(AuthError::OutOfOrder { expected: "Hello" }),
            Handshake::AwaitAuth {
                host,
                client_nonce,
                server_nonce,
            } => match keys.get(host) {
                Some(k) if verify(k, server_nonce, client_nonce, host, tag) => Ok(host.clone()),
                _ => Err(AuthError::Failed),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K0: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const K1: &str = "FFEEDDCCBBAA99887766554433221100ffeeddccbbaa99887766554433221100";

    #[test]
    fn keys_file_errors_are_typed() {
        let ok = format!("[hosts]\nh0 = \"{K0}\"\nh1 = \"{K1}\"\n");
        let k = Keys::from_toml(&ok).unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(k.get("h1").unwrap().to_hex(), K1.to_lowercase());
        let round = Keys::from_toml(&k.to_toml()).unwrap();
        assert_eq!(round, k);

        type Check = fn(&KeysError) -> bool;
        let table: Vec<(String, Check)> = vec![
            ("x = 1".into(), |e| matches!(e, KeysError::NoHosts)),
            (
                "[hosts]\nh0 = 3".into(),
                |e| matches!(e, KeysError::NotAString(h) if h == "h0"),
            ),
            (format!("[hosts]\nh0 = \"{}\"", &K0[..62]), |e| {
                matches!(
                    e,
                    KeysError::BadKey {
                        source: HexError::Length(62),
                        ..
                    }
                )
            }),
            (format!("[hosts]\nh0 = \"{}zz\"", &K0[..62]), |e| {
                matches!(
                    e,
                    KeysError::BadKey {
                        source: HexError::Digit(62),
                        ..
                    }
                )
            }),
            (
                format!("[hosts]\nh0 = \"{K0}\"\nh0 = \"{K1}\""),
                |e| matches!(e, KeysError::DuplicateHost(h) if h == "h0"),
            ),
            (format!("[hosts]\nh0 = \"{K0}\"\nh1 = \"{K0}\""), |e| {
                matches!(e, KeysError::SharedKey(..))
            }),
            ("[hosts\n".into(), |e| matches!(e, KeysError::Toml(_))),
        ];
        for (i, (text, check)) in table.iter().enumerate() {
            let e = Keys::from_toml(text).unwrap_err();
            assert!(check(&e), "case {i}: {e:?}");
        }
    }

    #[test]
    fn keygen_names_and_randomness() {
        let k = Keys::generate(&["h0", "h1"]).unwrap();
        assert_ne!(k.get("h0"), k.get("h1"));
        assert!(matches!(
            Keys::generate(&["h0", "h0"]),
            Err(KeygenError::DuplicateHost(_))
        ));
        assert!(matches!(
            Keys::generate(&["a b"]),
            Err(KeygenError::BadName(_))
        ));
        assert!(matches!(
            Keys::generate::<&str>(&[]),
            Err(KeygenError::NoHosts)
        ));
    }

    #[test]
    fn handshake_accepts_only_the_right_mac() {
        let keys = Keys::from_toml(&format!("[hosts]\nh0 = \"{K0}\"\nh1 = \"{K1}\"\n")).unwrap();
        let sn = [1u8; 32];
        let cn = [2u8; 32];
        let k0 = keys.get("h0").unwrap().clone();
        let good = mac(&k0, &sn, &cn, "h0");
        let mut hs = Handshake::new(sn);
        assert_eq!(
            hs.auth(&keys, &good),
            Err(AuthError::OutOfOrder { expected: "Hello" })
        );
        assert_eq!(hs.hello("h0", cn).unwrap(), sn);
        assert_eq!(hs.auth(&keys, &good).unwrap(), "h0");
        let mut bad = good;
        bad[31] ^= 1;
        assert_eq!(hs.auth(&keys, &bad), Err(AuthError::Failed));
        // h0's key used to claim h1, and an unknown host: same answer.
        for host in ["h1", "nobody"] {
            let mut hs = Handshake::new(sn);
            hs.hello(host, cn).unwrap();
            assert_eq!(
                hs.auth(&keys, &mac(&k0, &sn, &cn, host)),
                Err(AuthError::Failed)
            );
        }
        // A replayed tag under a new server nonce fails.
        let mut hs = Handshake::new([3u8; 32]);
        hs.hello("h0", cn).unwrap();
        assert_eq!(hs.auth(&keys, &good), Err(AuthError::Failed));
    }
}
