//! Keys and the cluster key file.
//!
//! ```toml
//! # One entry per group or tunnel; every member of a group holds its key.
//! [[key]]
//! id = 1
//! secret = "00112233445566778899aabbccddeeff"   # 32 hex digits
//! ```

/// Bytes of a key.
pub const KEY_LEN: usize = 16;

/// A 128-bit MAC key. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_LEN]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key of these bytes.
    pub fn from_bytes(b: [u8; KEY_LEN]) -> Key {
        Key(b)
    }

    /// A fresh key from the kernel's random source.
    pub fn random() -> std::io::Result<Key> {
        use std::io::Read;
        let mut b = [0u8; KEY_LEN];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        Ok(Key(b))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// Parses 32 hex digits.
    pub fn from_hex(s: &str) -> Option<Key> {
        let s = s.trim();
        if s.len() != 2 * KEY_LEN || !s.is_ascii() {
            return None;
        }
        let mut b = [0u8; KEY_LEN];
        for (i, x) in b.iter_mut().enumerate() {
            *x = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Key(b))
    }

    /// A key derived from this one for `context` (a PRF: SipHash-2-4 with
    /// 128-bit output, keyed with this key): the controller derives each
    /// tunnel's key from its secret and the tunnel id, so it stores none.
    pub fn derive(&self, context: &[u8]) -> Key {
        use siphasher::sip128::Hasher128;
        use std::hash::Hasher;
        let mut h = siphasher::sip128::SipHasher24::new_with_key(&self.0);
        h.write(b"xlane key derivation\0");
        h.write(context);
        Key(h.finish128().as_bytes())
    }

    /// 32 hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Why a key file was refused (the message names the entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFileError {
    /// Not TOML, or not of this shape.
    #[error("key file: {0}")]
    Syntax(String),
    /// A secret that is not 32 hex digits.
    #[error("key file: key[{index}] (id {id}): secret must be 32 hex digits")]
    BadSecret {
        /// Its place in the file.
        index: usize,
        /// Its id.
        id: u32,
    },
    /// The same id twice.
    #[error("key file: key[{index}]: id {id} given twice")]
    Duplicate {
        /// Its place in the file.
        index: usize,
        /// The id.
        id: u32,
    },
    /// No key at all.
    #[error("key file: no [[key]] entry")]
    Empty,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    key: Option<Vec<Entry>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: u32,
    secret: String,
}

/// Keys by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRing {
    keys: Vec<(u32, Key)>,
}

impl KeyRing {
    /// A ring of these keys (a later id replaces an earlier one).
    pub fn from_pairs(pairs: &[(u32, Key)]) -> KeyRing {
        let mut r = KeyRing::default();
        for (id, k) in pairs {
            r.insert(*id, k.clone());
        }
        r
    }

    /// Adds or replaces key `id` (a new grant's key, say).
    pub fn insert(&mut self, id: u32, key: Key) {
        match self.keys.iter_mut().find(|(i, _)| *i == id) {
            Some(e) => e.1 = key,
            None => self.keys.push((id, key)),
        }
    }

    /// Key `id`.
    pub fn get(&self, id: u32) -> Option<&Key> {
        self.keys.iter().find(|(i, _)| *i == id).map(|(_, k)| k)
    }

    /// The ids held.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.keys.iter().map(|(i, _)| *i)
    }

    /// Parses a cluster key file (see the module docs).
    pub fn from_toml(text: &str) -> Result<KeyRing, KeyFileError> {
        let f: File = toml::from_str(text).map_err(|e| KeyFileError::Syntax(e.message().into()))?;
        let entries = f.key.unwrap_or_default();
        if entries.is_empty() {
            return Err(KeyFileError::Empty);
        }
        let mut r = KeyRing::default();
        for (index, e) in entries.iter().enumerate() {
            let key =
                Key::from_hex(&e.secret).ok_or(KeyFileError::BadSecret { index, id: e.id })?;
            if r.get(e.id).is_some() {
                return Err(KeyFileError::Duplicate { index, id: e.id });
            }
            r.insert(e.id, key);
        }
        Ok(r)
    }

    /// The ring as a key file.
    pub fn to_toml(&self) -> String {
        let mut s = String::from("# xlane cluster keys: keep this file secret (mode 0600).\n");
        for (id, k) in &self.keys {
            s += &format!("\n[[key]]\nid = {id}\nsecret = \"{}\"\n", k.to_hex());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_round_trip_and_bad_ones_name_the_entry() {
        let r = KeyRing::from_pairs(&[
            (1, Key::from_bytes([0xab; 16])),
            (7, Key::from_bytes([1; 16])),
        ]);
        assert_eq!(KeyRing::from_toml(&r.to_toml()), Ok(r.clone()));
        assert_eq!(format!("{:?}", r.get(1).unwrap()), "Key(..)");
        let cases: &[(&str, KeyFileError)] = &[
            ("", KeyFileError::Empty),
            (
                "[[key]]\nid = 3\nsecret = \"abc\"\n",
                KeyFileError::BadSecret { index: 0, id: 3 },
            ),
            (
                "[[key]]\nid = 3\nsecret = \"zz112233445566778899aabbccddeeff\"\n",
                KeyFileError::BadSecret { index: 0, id: 3 },
            ),
            (
                "[[key]]\nid = 3\nsecret = \"00112233445566778899aabbccddeeff\"\n[[key]]\nid = 3\nsecret = \"00112233445566778899aabbccddeeff\"\n",
                KeyFileError::Duplicate { index: 1, id: 3 },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(KeyRing::from_toml(text).as_ref(), Err(want), "{text:?}");
        }
        for bad in [
            "[[key]]\nid = -1\nsecret = \"x\"\n",
            "[[key]]\nid = 1\n",
            "[[key]]\nid = 1\nsecret = \"00112233445566778899aabbccddeeff\"\ncolour = 1\n",
        ] {
            assert!(
                matches!(KeyRing::from_toml(bad), Err(KeyFileError::Syntax(_))),
                "{bad:?}"
            );
        }
        assert_ne!(Key::random().unwrap(), Key::random().unwrap());
        // Derived keys: the same for the same context, another for another
        // context or another master.
        let m = Key::from_bytes([9; 16]);
        assert_eq!(m.derive(b"tunnel 1"), m.derive(b"tunnel 1"));
        assert_ne!(m.derive(b"tunnel 1"), m.derive(b"tunnel 2"));
        assert_ne!(
            m.derive(b"tunnel 1"),
            Key::from_bytes([8; 16]).derive(b"tunnel 1")
        );
        assert_ne!(m.derive(b"tunnel 1"), m);
    }
}
