//! Can a program be preloaded? Only an ELF executable with a program
//! interpreter (`PT_INTERP`, the dynamic loader) reads `LD_PRELOAD`; a
//! static binary (Go programs such as etcd; static-pie too) has none.
//! A Go program is also out of reach even when dynamically linked (Debian's
//! etcd is): Go makes its system calls itself, not through libc, so a
//! preloaded `socket()` is never called. A script (`#!`) runs its
//! interpreter, which is assumed dynamic.

/// What kind of executable a file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfKind {
    /// An ELF executable with a dynamic loader: preloadable.
    Dynamic,
    /// An ELF executable without one: not preloadable.
    Static,
    /// A Go program (its build-information blob `\xff Go buildinf:` is
    /// present): its sockets bypass libc, not preloadable.
    Go,
    /// A `#!` script; its interpreter line.
    Script(String),
}

/// Why a file could not be classified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    /// Neither ELF nor a script.
    #[error("not an ELF executable or a #! script")]
    NotExecutable,
    /// The ELF header or program headers are cut short or malformed.
    #[error("malformed ELF: {0}")]
    Malformed(&'static str),
}

const PT_INTERP: u32 = 3;

fn read_u16(b: &[u8], at: usize, le: bool) -> Option<u16> {
    let s: [u8; 2] = b.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(if le {
        u16::from_le_bytes(s)
    } else {
        u16::from_be_bytes(s)
    })
}

fn read_u32(b: &[u8], at: usize, le: bool) -> Option<u32> {
    let s: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(s)
    } else {
        u32::from_be_bytes(s)
    })
}

fn read_u64(b: &[u8], at: usize, le: bool) -> Option<u64> {
    let s: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(if le {
        u64::from_le_bytes(s)
    } else {
        u64::from_be_bytes(s)
    })
}

/// The magic at the start of a Go binary's build information.
const GO_BUILDINFO: &[u8] = b"\xff Go buildinf:";

fn is_go(bytes: &[u8]) -> bool {
    bytes.windows(GO_BUILDINFO.len()).any(|w| w == GO_BUILDINFO)
}

impl ElfKind {
    /// Whether `LD_PRELOAD` reaches the program's sockets.
    pub fn preloadable(&self) -> bool {
        matches!(self, ElfKind::Dynamic | ElfKind::Script(_))
    }
}

/// Classifies an executable file's bytes (the whole file: the Go
/// build information may be anywhere).
pub fn elf_kind(bytes: &[u8]) -> Result<ElfKind, ElfError> {
    if let Some(rest) = bytes.strip_prefix(b"#!") {
        let line = rest.split(|&b| b == b'\n').next().unwrap_or(&[]);
        return Ok(ElfKind::Script(
            String::from_utf8_lossy(line).trim().to_string(),
        ));
    }
    if !bytes.starts_with(b"\x7fELF") {
        return Err(ElfError::NotExecutable);
    }
    let class64 = match bytes.get(4) {
        Some(1) => false,
        Some(2) => true,
        _ => return Err(ElfError::Malformed("bad class")),
    };
    let le = match bytes.get(5) {
        Some(1) => true,
        Some(2) => false,
        _ => return Err(ElfError::Malformed("bad byte order")),
    };
    let short = ElfError::Malformed("header cut short");
    let (phoff, phentsize, phnum) = if class64 {
        (
            read_u64(bytes, 0x20, le).ok_or(short.clone())?,
            read_u16(bytes, 0x36, le).ok_or(short.clone())?,
            read_u16(bytes, 0x38, le).ok_or(short.clone())?,
        )
    } else {
        (
            read_u32(bytes, 0x1c, le).ok_or(short.clone())? as u64,
            read_u16(bytes, 0x2a, le).ok_or(short.clone())?,
            read_u16(bytes, 0x2c, le).ok_or(short.clone())?,
        )
    };
    if phentsize < 4 && phnum > 0 {
        return Err(ElfError::Malformed("program header entries too small"));
    }
    let phoff = usize::try_from(phoff).map_err(|_| ElfError::Malformed("program headers"))?;
    for i in 0..phnum as usize {
        let at = (i * phentsize as usize)
            .checked_add(phoff)
            .ok_or(ElfError::Malformed("program headers"))?;
        let p_type =
            read_u32(bytes, at, le).ok_or(ElfError::Malformed("program headers cut short"))?;
        if p_type == PT_INTERP {
            return Ok(if is_go(bytes) {
                ElfKind::Go
            } else {
                ElfKind::Dynamic
            });
        }
    }
    Ok(ElfKind::Static)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_is_dynamic() {
        let b = std::fs::read("/bin/sh").unwrap();
        assert_eq!(elf_kind(&b), Ok(ElfKind::Dynamic));
    }

    #[test]
    fn handmade_headers() {
        // 64-bit little endian, one program header of type PT_LOAD (1).
        let mut h = vec![0u8; 0x40 + 0x38];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        h[0x36..0x38].copy_from_slice(&0x38u16.to_le_bytes());
        h[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        h[0x40] = 1;
        assert_eq!(elf_kind(&h), Ok(ElfKind::Static));
        h[0x40] = 3;
        assert_eq!(elf_kind(&h), Ok(ElfKind::Dynamic));
        let mut go = h.clone();
        go.extend_from_slice(GO_BUILDINFO);
        assert_eq!(elf_kind(&go), Ok(ElfKind::Go));
        assert!(!ElfKind::Go.preloadable() && ElfKind::Dynamic.preloadable());
        assert!(elf_kind(&h[..0x41]).is_err());
        assert_eq!(elf_kind(b"hello"), Err(ElfError::NotExecutable));
        assert_eq!(
            elf_kind(b"#!/bin/sh -e\necho"),
            Ok(ElfKind::Script("/bin/sh -e".into()))
        );
        let mut bad = h.clone();
        bad[4] = 9;
        assert!(elf_kind(&bad).is_err());
    }
}
