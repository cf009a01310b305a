//! The faults a fault run injects into one member, as Jepsen does to the
//! stores it tests: each one started, held, then healed.
//!
//! - `kill`: `kill -9`, then a restart from the member's data directory;
//! - `cut`: its link down (a partition of the member from all others);
//! - `pause`: `SIGSTOP`, then `SIGCONT` (a process that stops for longer
//!   than an election timeout and then goes on as if nothing happened);
//! - `deaf` and `mute`: one-way partitions (the member sends but receives
//!   nothing, or receives but sends nothing: a netfilter drop rule on one
//!   direction of its link);
//! - `clock`: its wall clock stepped forward or back by seconds (the member
//!   runs under libfaketime, reading its offset from a file; the monotonic
//!   clock does not move, as when an operator or a broken NTP steps it);
//! - `disk`: its data directory (a small tmpfs) filled to the last byte,
//!   then freed; a member that stopped on the full disk is restarted.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    Kill,
    Cut,
    Pause,
    Deaf,
    Mute,
    Clock,
    Disk,
}

impl Fault {
    /// Every kind, in the order the report lists them.
    pub const ALL: [Fault; 7] = [
        Fault::Kill,
        Fault::Cut,
        Fault::Pause,
        Fault::Deaf,
        Fault::Mute,
        Fault::Clock,
        Fault::Disk,
    ];

    /// Its name in `KV_FAULTS` and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Cut => "cut",
            Fault::Pause => "pause",
            Fault::Deaf => "deaf",
            Fault::Mute => "mute",
            Fault::Clock => "clock",
            Fault::Disk => "disk",
        }
    }

    /// The kinds `spec` names (`all`, or names separated by commas).
    pub fn parse_list(spec: &str) -> Result<Vec<Fault>, String> {
        if spec.trim() == "all" {
            return Ok(Fault::ALL.to_vec());
        }
        let mut out = Vec::new();
        for w in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let f = Fault::ALL
                .into_iter()
                .find(|f| f.name() == w)
                .ok_or_else(|| {
                    let names: Vec<_> = Fault::ALL.iter().map(|f| f.name()).collect();
                    format!("unknown fault {w:?} (all, or some of {})", names.join(", "))
                })?;
            if !out.contains(&f) {
                out.push(f);
            }
        }
        if out.is_empty() {
            return Err("no fault named".into());
        }
        Ok(out)
    }
}

/// The kinds the run injects: `KV_FAULTS` (all by default).
pub fn selected() -> Vec<Fault> {
    let spec = std::env::var("KV_FAULTS").unwrap_or_else(|_| "all".into());
    Fault::parse_list(&spec).unwrap_or_else(|e| panic!("KV_FAULTS: {e}"))
}

/// libfaketime, from Debian's `faketime` package (scripts/test.sh installs
/// it); the thread-safe build, for a member's many threads.
pub const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// The environment that puts a member's wall clock at the offset written
/// in `offset_file`, read again at most a second after it changes.
pub fn faketime_env(offset_file: &Path) -> Vec<(&'static str, String)> {
    assert!(
        Path::new(FAKETIME_LIB).exists(),
        "{FAKETIME_LIB} is missing: install Debian's faketime package (scripts/test.sh does)"
    );
    vec![
        ("LD_PRELOAD", FAKETIME_LIB.into()),
        ("FAKETIME_TIMESTAMP_FILE", offset_file.display().to_string()),
        ("FAKETIME_CACHE_DURATION", "1".into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
    ]
}

/// Removes the shared-memory pair libfaketime 0.9.10 makes for process
/// `pid` (`/dev/shm/faketime_shm_<pid>`, `sem.faketime_sem_<pid>`) and never
/// removes, even at a clean exit. Call it once the process is reaped.
pub fn faketime_reaped(pid: u32) {
    for name in [
        format!("faketime_shm_{pid}"),
        format!("sem.faketime_sem_{pid}"),
    ] {
        let _ = std::fs::remove_file(Path::new("/dev/shm").join(name));
    }
}

/// Sets the wall clock offset of the member reading `offset_file`, in
/// seconds (libfaketime's `+N`/`-N`).
pub fn set_clock(offset_file: &Path, secs: i64) {
    let spec = if secs >= 0 {
        format!("+{secs}\n")
    } else {
        format!("{secs}\n")
    };
    std::fs::write(offset_file, spec).expect("clock offset file");
}

/// A tmpfs of `mib` MiB mounted at `dir` (created), unmounted when dropped.
pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    pub fn mount(dir: &Path, mib: u32) -> SmallDisk {
        std::fs::create_dir_all(dir).expect("the member's data directory");
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(st.success(), "mount a tmpfs at {}", dir.display());
        SmallDisk {
            dir: dir.to_path_buf(),
        }
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("filler")
    }

    /// Fills the disk to the last byte: the bytes written.
    pub fn fill(&self) -> u64 {
        let mut f = std::fs::File::create(self.filler()).expect("filler");
        let chunk = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            match f.write(&chunk) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k as u64,
            }
        }
        n
    }

    /// Frees what [`SmallDisk::fill`] took.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.filler());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// The netfilter rule that drops one direction of `iface`'s traffic:
/// incoming for a deaf member, outgoing for a mute one.
pub fn one_way_rule(fault: Fault, iface: &str) -> Vec<String> {
    let (chain, dir) = match fault {
        Fault::Deaf => ("INPUT", "-i"),
        Fault::Mute => ("OUTPUT", "-o"),
        other => panic!("{other:?} is not a one-way partition"),
    };
    [chain, dir, iface, "-j", "DROP"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn fault_lists_parse() {
    let cases: [(&str, Result<Vec<Fault>, ()>); 5] = [
        ("all", Ok(Fault::ALL.to_vec())),
        ("pause", Ok(vec![Fault::Pause])),
        ("deaf, mute,deaf", Ok(vec![Fault::Deaf, Fault::Mute])),
        ("pause,sleep", Err(())),
        ("", Err(())),
    ];
    for (spec, want) in cases {
        assert_eq!(Fault::parse_list(spec).map_err(|_| ()), want, "{spec:?}");
    }
}
