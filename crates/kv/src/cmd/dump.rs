//! DUMP and RESTORE: a value as Redis 7.0's serialized payload
//! ([`crate::data::rdb`]), so that values move between a real Redis and
//! xlane kv in both directions. `RESTORE` is a write: the payload travels
//! in the op and every member decodes it the same way; a relative TTL
//! counts from the op's logical instant. `MIGRATE` (which would connect to
//! another server from inside a replicated op) is refused.

use crate::data::rdb::{self, RdbError, RestoreExpiry, RestoreOptions};
use crate::notify::NotifyFlags;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::SplitMix;

pub(super) const NAMES: &[&str] = &["dump", "restore", "restore-asking", "migrate"];

pub(super) enum Cmd<'a> {
    Dump(&'a [u8]),
    Restore {
        key: &'a [u8],
        ttl: i64,
        payload: &'a [u8],
        opts: RestoreOptions,
    },
    Migrate,
}

fn err(e: RdbError) -> Reply {
    Reply::err(e.to_string())
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    Ok(match name {
        "dump" => Cmd::Dump(&a[1]),
        "restore" | "restore-asking" => {
            let opts: Vec<&[u8]> = a[4..].iter().map(|o| o.as_slice()).collect();
            let opts = rdb::parse_restore_options(&opts).map_err(err)?;
            let ttl = rdb::parse_restore_ttl(&a[2]).map_err(err)?;
            Cmd::Restore {
                key: &a[1],
                ttl,
                payload: &a[3],
                opts,
            }
        }
        _ => Cmd::Migrate,
    })
}

impl super::run::Run for Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        let Cmd::Restore {
            key,
            ttl,
            payload,
            opts,
        } = self
        else {
            return self.read(st, now, rng);
        };
        if !opts.replace && st.cur(key).is_some() {
            return err(RdbError::BusyKey);
        }
        let value = match rdb::restore(payload) {
            Ok(v) => v,
            Err(e) => return err(e),
        };
        match rdb::restore_expiry(*ttl, opts.absttl, now as i64) {
            RestoreExpiry::AlreadyExpired => {
                if opts.replace {
                    st.delete_with_event(key);
                }
            }
            e => {
                let at = match e {
                    RestoreExpiry::At(t) => Some(t.max(0) as u64),
                    _ => None,
                };
                st.put_value(key, value, at);
                st.notify(NotifyFlags::GENERIC, "restore", key);
            }
        }
        Reply::ok()
    }

    fn read(&self, st: &Store, now: u64, _rng: &mut SplitMix) -> Reply {
        match self {
            Cmd::Dump(k) => st
                .value(k, now)
                .map_or(Reply::nil(), |v| Reply::bulk(rdb::dump(v))),
            Cmd::Migrate => Reply::err(
                "ERR MIGRATE is not served: xlane kv moves a value with DUMP and RESTORE \
                 (a replicated op cannot connect to another server)",
            ),
            Cmd::Restore { .. } => super::args::syntax(),
        }
    }
}
