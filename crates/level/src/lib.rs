//! QJump levels for unmodified programs (`xlane run`).
//!
//! Three pieces shared by `xlane run` (which sets a program up) and the
//! preload library `xlane-preload` (which marks the program's sockets):
//!
//! * [`levels`]: the level table — which DSCP, which `SO_PRIORITY` and
//!   which QJump throughput factor each `--level` means;
//! * [`env`](mod@env): the environment variables through which `xlane run` tells the
//!   preload library what to do, and their parser. The parser never
//!   allocates and never panics: it runs inside the preloaded program,
//!   across the FFI boundary;
//! * [`elf`]: whether a program can be preloaded at all (a static binary,
//!   such as a Go program, has no dynamic loader to preload into).

#![deny(missing_docs)]

pub mod elf;
pub mod env;
pub mod levels;

pub use elf::{elf_kind, ElfError, ElfKind};
pub use env::{parse_config, parse_ports, ConfigError, LevelConfig, PortSet};
pub use levels::{LevelSpec, LEVELS};
