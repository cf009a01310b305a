//! The environment protocol between `xlane run` and the preload library.
//!
//! `xlane run` sets, for the program and everything it starts:
//!
//! | variable | value | meaning |
//! |---|---|---|
//! | [`ENV_TOS`] | decimal `0..=255` | TOS byte (IPv4 `IP_TOS`, IPv6 `IPV6_TCLASS`) |
//! | [`ENV_PRIORITY`] | decimal `0..=6` | `SO_PRIORITY` |
//! | [`ENV_PORTS`] | `P[,P...]`, each `1..=65535`, at most [`MAX_PORTS`]; empty or unset: every socket | only sockets whose local or remote port is listed |
//!
//! plus `LD_PRELOAD` naming the library. Without [`ENV_TOS`] the library
//! does nothing; a bad value is reported once on stderr by the library,
//! which then does nothing.
//!
//! [`parse_config`] and [`PortSet`] never allocate and never panic, so the
//! library can call them from inside the program's `socket()`.

/// The TOS byte of the level.
pub const ENV_TOS: &str = "XLANE_LEVEL_TOS";
/// The `SO_PRIORITY` of the level.
pub const ENV_PRIORITY: &str = "XLANE_LEVEL_PRIORITY";
/// The port filter.
pub const ENV_PORTS: &str = "XLANE_LEVEL_PORTS";
/// Most ports a filter holds.
pub const MAX_PORTS: usize = 32;
/// Highest `SO_PRIORITY` an unprivileged socket may take.
pub const MAX_PRIORITY: u8 = 6;

/// What the preload library applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelConfig {
    /// TOS / traffic-class byte.
    pub tos: u8,
    /// `SO_PRIORITY`.
    pub priority: u8,
    /// Ports whose sockets go on the level (empty: all sockets).
    pub ports: PortSet,
}

/// A fixed-capacity set of ports (no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSet {
    len: u8,
    ports: [u16; MAX_PORTS],
}

impl PortSet {
    /// The empty set (no filter: every socket).
    pub const EMPTY: PortSet = PortSet {
        len: 0,
        ports: [0; MAX_PORTS],
    };

    /// Whether no port is listed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ports, in the order given.
    pub fn as_slice(&self) -> &[u16] {
        &self.ports[..self.len as usize]
    }

    /// Whether `p` is listed.
    pub fn contains(&self, p: u16) -> bool {
        self.as_slice().contains(&p)
    }

    fn push(&mut self, p: u16) -> Result<(), ConfigError> {
        if self.contains(p) {
            return Ok(());
        }
        let i = self.len as usize;
        if i >= MAX_PORTS {
            return Err(ConfigError::TooManyPorts);
        }
        self.ports[i] = p;
        self.len += 1;
        Ok(())
    }
}

/// A bad configuration value (messages are static: no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The TOS is not a number in `0..=255`.
    #[error("XLANE_LEVEL_TOS must be a number 0..=255")]
    BadTos,
    /// The priority is not a number in `0..=6`.
    #[error("XLANE_LEVEL_PRIORITY must be a number 0..=6")]
    BadPriority,
    /// The priority is missing while the TOS is set.
    #[error("XLANE_LEVEL_PRIORITY is missing")]
    MissingPriority,
    /// A port is not a number in `1..=65535`.
    #[error("ports must be numbers 1..=65535 separated by commas")]
    BadPort,
    /// More than [`MAX_PORTS`] ports.
    #[error("at most 32 ports")]
    TooManyPorts,
}

impl ConfigError {
    /// The message, as a static string (for writing without allocation).
    pub fn message(&self) -> &'static str {
        match self {
            ConfigError::BadTos => "XLANE_LEVEL_TOS must be a number 0..=255",
            ConfigError::BadPriority => "XLANE_LEVEL_PRIORITY must be a number 0..=6",
            ConfigError::MissingPriority => "XLANE_LEVEL_PRIORITY is missing",
            ConfigError::BadPort => "ports must be numbers 1..=65535 separated by commas",
            ConfigError::TooManyPorts => "at most 32 ports",
        }
    }
}

/// A decimal number without sign, spaces or leading `+`, at most `max`.
fn number(s: &[u8], max: u32) -> Option<u32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let mut v: u32 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u32)?;
    }
    (v <= max).then_some(v)
}

/// Parses a port list `P[,P...]` (duplicates kept once; empty: no
/// filter).
pub fn parse_ports(s: &[u8]) -> Result<PortSet, ConfigError> {
    let mut set = PortSet::EMPTY;
    if s.is_empty() {
        return Ok(set);
    }
    for part in s.split(|&b| b == b',') {
        let p = number(part, 65_535).ok_or(ConfigError::BadPort)?;
        if p == 0 {
            return Err(ConfigError::BadPort);
        }
        set.push(p as u16)?;
    }
    Ok(set)
}

/// Parses the three variables' values (`None`: unset). `Ok(None)`: the
/// TOS is unset, nothing to do.
pub fn parse_config(
    tos: Option<&[u8]>,
    priority: Option<&[u8]>,
    ports: Option<&[u8]>,
) -> Result<Option<LevelConfig>, ConfigError> {
    let Some(tos) = tos else {
        return Ok(None);
    };
    let tos = number(tos, 255).ok_or(ConfigError::BadTos)? as u8;
    let priority = number(
        priority.ok_or(ConfigError::MissingPriority)?,
        MAX_PRIORITY as u32,
    )
    .ok_or(ConfigError::BadPriority)? as u8;
    let ports = match ports {
        Some(p) => parse_ports(p)?,
        None => PortSet::EMPTY,
    };
    Ok(Some(LevelConfig {
        tos,
        priority,
        ports,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_configurations() {
        let c = parse_config(Some(b"184"), Some(b"6"), Some(b"2380,2380,7"))
            .unwrap()
            .unwrap();
        assert_eq!((c.tos, c.priority), (184, 6));
        assert_eq!(c.ports.as_slice(), &[2380, 7]);
        assert!(c.ports.contains(7) && !c.ports.contains(2379));
        let all = parse_config(Some(b"0"), Some(b"0"), Some(b""))
            .unwrap()
            .unwrap();
        assert!(all.ports.is_empty());
        assert_eq!(parse_config(None, Some(b"x"), Some(b"y")), Ok(None));
    }

    #[test]
    fn bad_configurations() {
        type Case<'a> = (&'a [u8], Option<&'a [u8]>, Option<&'a [u8]>, ConfigError);
        let table: [Case; 10] = [
            (b"256", Some(b"1"), None, ConfigError::BadTos),
            (b"-1", Some(b"1"), None, ConfigError::BadTos),
            (b"", Some(b"1"), None, ConfigError::BadTos),
            (b" 1", Some(b"1"), None, ConfigError::BadTos),
            (b"99999999999", Some(b"1"), None, ConfigError::BadTos),
            (b"1", None, None, ConfigError::MissingPriority),
            (b"1", Some(b"7"), None, ConfigError::BadPriority),
            (b"1", Some(b"1"), Some(b"0"), ConfigError::BadPort),
            (b"1", Some(b"1"), Some(b"80,"), ConfigError::BadPort),
            (b"1", Some(b"1"), Some(b"65536"), ConfigError::BadPort),
        ];
        for (t, p, ports, want) in table {
            assert_eq!(
                parse_config(Some(t), p, ports),
                Err(want),
                "{t:?} {p:?} {ports:?}"
            );
        }
        let many: Vec<String> = (1..=33).map(|p| p.to_string()).collect();
        assert_eq!(
            parse_ports(many.join(",").as_bytes()),
            Err(ConfigError::TooManyPorts)
        );
        assert_eq!(
            parse_ports(many[..32].join(",").as_bytes()).map(|s| s.as_slice().len()),
            Ok(32)
        );
    }

    #[test]
    fn messages_agree_with_display() {
        for e in [
            ConfigError::BadTos,
            ConfigError::BadPriority,
            ConfigError::MissingPriority,
            ConfigError::BadPort,
            ConfigError::TooManyPorts,
        ] {
            assert_eq!(e.to_string(), e.message());
        }
    }
}
