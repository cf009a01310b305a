//! Geo commands: GEOADD, GEODIST, GEOHASH, GEOPOS, GEORADIUS,
//! GEORADIUS_RO, GEORADIUSBYMEMBER, GEORADIUSBYMEMBER_RO, GEOSEARCH,
//! GEOSEARCHSTORE, on the computations of [`crate::data::geo`] (a geo set
//! is a sorted set whose scores are 52-bit geohashes).
//!
//! Order of checks, as Redis's: `GEOADD`'s options and points, and
//! `GEODIST`'s unit, are checked before the key (here, in [`parse`]);
//! the searches look the source key up first (`WRONGTYPE`), then parse
//! their options against it (`FROMMEMBER` and `GEORADIUSBYMEMBER`'s
//! member are resolved while parsing, so their errors come among the
//! option errors).
//!
//! Replication: `GEOADD` and the searches with a store target
//! (`GEORADIUS`/`GEORADIUSBYMEMBER` with `STORE`/`STOREDIST`,
//! `GEOSEARCHSTORE`) are writes, applied by every member from the op's
//! words: the search (sines and cosines included) runs on every member.
//! `GEORADIUS`/`GEORADIUSBYMEMBER` without a store target are flagged
//! `write` by the table but change nothing: they say so
//! ([`super::Run::reads_only`]) and are answered as reads, never logged.

use crate::data::geo::{
    apply_geoadd, collect, geodist_reply, geohash_reply, geopos_reply, parse_geoadd, parse_geodist,
    parse_search, search, search_reply, store_entries, GeoAdd, GeoError, SearchCommand, SearchPlan,
    StoreTarget, Unit,
};
use crate::notify::NotifyFlags;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{SplitMix, Value, ZSet};

pub(super) const NAMES: &[&str] = &[
    "geoadd",
    "geodist",
    "geohash",
    "geopos",
    "georadius",
    "georadius_ro",
    "georadiusbymember",
    "georadiusbymember_ro",
    "geosearch",
    "geosearchstore",
];

/// A parsed geo command.
pub(super) enum Cmd<'a> {
    /// `GEOADD key ...`: the points as ZADD pairs, with `CH` forced on
    /// (so the module's count is added + changed, which says whether the
    /// key changed); `ch` is the client's `CH`.
    Add {
        key: &'a [u8],
        add: GeoAdd,
        ch: bool,
    },
    /// `GEODIST key m1 m2 [unit]`, its unit already checked.
    Dist {
        key: &'a [u8],
        m1: &'a [u8],
        m2: &'a [u8],
        unit: Unit,
    },
    /// `GEOHASH key member ...`.
    Hash(&'a [u8], &'a [Vec<u8>]),
    /// `GEOPOS key member ...`.
    Pos(&'a [u8], &'a [Vec<u8>]),
    /// One of the six searches: its words, parsed against the source set
    /// when run. `stores`: it has a store target (then it is a write).
    Search {
        cmd: SearchCommand,
        args: &'a [Vec<u8>],
        stores: bool,
    },
}

fn geo_err(e: GeoError) -> Reply {
    Reply::err(e.to_string())
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let search = |cmd: SearchCommand| {
        // Whether it stores does not depend on the source set: the store
        // options parse alike without it. A command that fails to parse
        // replies an error (or WRONGTYPE) and stores nothing.
        let stores = match cmd {
            SearchCommand::GeoSearchStore => true,
            SearchCommand::GeoRadius | SearchCommand::GeoRadiusByMember => matches!(
                parse_search(cmd, a, None),
                Ok(SearchPlan::KeyMissing { store: Some(_) })
            ),
            _ => false,
        };
        Cmd::Search {
            cmd,
            args: a,
            stores,
        }
    };
    Ok(match name {
        "geoadd" => {
            let mut add = parse_geoadd(a).map_err(geo_err)?;
            let ch = add.ch;
            add.ch = true;
            Cmd::Add {
                key: &a[1],
                add,
                ch,
            }
        }
        "geodist" => Cmd::Dist {
            unit: parse_geodist(a).map_err(geo_err)?,
            key: &a[1],
            m1: &a[2],
            m2: &a[3],
        },
        "geohash" => Cmd::Hash(&a[1], &a[2..]),
        "geopos" => Cmd::Pos(&a[1], &a[2..]),
        "georadius" => search(SearchCommand::GeoRadius),
        "georadius_ro" => search(SearchCommand::GeoRadiusRo),
        "georadiusbymember" => search(SearchCommand::GeoRadiusByMember),
        "georadiusbymember_ro" => search(SearchCommand::GeoRadiusByMemberRo),
        "geosearch" => search(SearchCommand::GeoSearch),
        "geosearchstore" => search(SearchCommand::GeoSearchStore),
        _ => return Err(super::args::syntax()),
    })
}

/// The sorted set a key holds: `None` for no key, WRONGTYPE for another
/// type.
fn zset_of(v: Option<&Value>) -> Result<Option<&ZSet>, Reply> {
    super::typed::typed::<ZSet>(v)
}

/// A search's plan against the source value `src` (WRONGTYPE first).
fn plan<'v>(
    cmd: SearchCommand,
    args: &[Vec<u8>],
    src: Option<&'v Value>,
) -> Result<(SearchPlan, Option<&'v ZSet>), Reply> {
    let z = zset_of(src)?;
    let plan = parse_search(cmd, args, z).map_err(geo_err)?;
    Ok((plan, z))
}

/// The keyspace event of a stored search.
fn store_event(cmd: SearchCommand) -> &'static str {
    match cmd {
        SearchCommand::GeoSearch | SearchCommand::GeoSearchStore => "geosearchstore",
        _ => "georadiusstore",
    }
}

impl Cmd<'_> {
    /// The source key of a search.
    fn source(cmd: SearchCommand, args: &[Vec<u8>]) -> &[u8] {
        &args[cmd.source_key_index()]
    }

    /// The reply when running it would change nothing (see
    /// [`super::unchanged_reply`]): `GEOADD` that adds and moves no point
    /// (or `XX` on an absent key); a stored search whose destination is
    /// absent and that finds nothing (or whose source is absent).
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        match self {
            Cmd::Add { key, add, .. } => {
                let z = match st.cur(key) {
                    None if add.xx => return Some(Reply::Integer(0)),
                    Some(Value::ZSet(z)) => z,
                    _ => return None,
                };
                let still = add.items.iter().all(|(score, m)| match z.scores.get(m) {
                    Some(cur) => add.nx || cur == score,
                    None => add.xx,
                });
                still.then_some(Reply::Integer(0))
            }
            Cmd::Search {
                cmd,
                args,
                stores: true,
            } => {
                let (plan, z) = plan(*cmd, args, st.cur(Self::source(*cmd, args))).ok()?;
                let (target, found) = match plan {
                    SearchPlan::KeyMissing { store } => (store?, false),
                    SearchPlan::Run(req) => {
                        let target = req.store?;
                        if st.cur(&target.key).is_some() {
                            return None;
                        }
                        // One member found is enough to know it stores.
                        (target, !collect(z?, &req.shape, 1).is_empty())
                    }
                };
                (!found && st.cur(&target.key).is_none()).then_some(Reply::Integer(0))
            }
            _ => None,
        }
    }

    /// Whether it changes nothing although the table flags it `write`:
    /// `GEORADIUS`/`GEORADIUSBYMEMBER` without `STORE`/`STOREDIST`.
    pub(super) fn reads_only(&self) -> bool {
        matches!(
            self,
            Cmd::Search {
                cmd: SearchCommand::GeoRadius | SearchCommand::GeoRadiusByMember,
                stores: false,
                ..
            }
        )
    }

    fn apply_inner(&self, st: &mut Store, now: u64) -> Result<Reply, Reply> {
        match self {
            Cmd::Add { key, add, ch } => {
                let mut z = match zset_of(st.cur(key))? {
                    None if add.xx => return Ok(Reply::Integer(0)),
                    None => ZSet::default(),
                    Some(z) => z.clone(),
                };
                let before = z.len();
                let touched = apply_geoadd(&mut z, add);
                let added = z.len().saturating_sub(before) as i64;
                if touched > 0 && !z.is_empty() {
                    match st.cur_mut(key) {
                        Some(Value::ZSet(cur)) => *cur = z,
                        _ => st.put_value(key, Value::ZSet(z), None),
                    }
                    st.notify(NotifyFlags::ZSET, "zadd", key);
                }
                Ok(Reply::Integer(if *ch { touched } else { added }))
            }
            Cmd::Search {
                cmd,
                args,
                stores: true,
            } => {
                let (plan, z) = plan(*cmd, args, st.cur(Self::source(*cmd, args)))?;
                let (target, points) = match (plan, z) {
                    (SearchPlan::KeyMissing { store: None }, _) => {
                        return Ok(super::args::empty());
                    }
                    (SearchPlan::KeyMissing { store: Some(t) }, _) => (t, Vec::new()),
                    (SearchPlan::Run(req), Some(z)) => {
                        let points = search(z, &req);
                        match req.store {
                            Some(t) => (t, points),
                            None => return Ok(search_reply(&points, &req)),
                        }
                    }
                    // A plan to run comes with a source set.
                    (SearchPlan::Run(_), None) => return Ok(super::args::empty()),
                };
                Ok(Reply::Integer(store(st, *cmd, &target, &points)))
            }
            _ => self.read_inner(st, now),
        }
    }

    fn read_inner(&self, st: &Store, now: u64) -> Result<Reply, Reply> {
        Ok(match self {
            Cmd::Dist { key, m1, m2, unit } => {
                geodist_reply(zset_of(st.value(key, now))?, m1, m2, *unit)
            }
            Cmd::Hash(key, members) => geohash_reply(zset_of(st.value(key, now))?, members),
            Cmd::Pos(key, members) => geopos_reply(zset_of(st.value(key, now))?, members),
            Cmd::Search { cmd, args, .. } => {
                let (plan, z) = plan(*cmd, args, st.value(Self::source(*cmd, args), now))?;
                match (plan, z) {
                    (SearchPlan::Run(req), Some(z)) if req.store.is_none() => {
                        search_reply(&search(z, &req), &req)
                    }
                    (SearchPlan::KeyMissing { store: None }, _) => super::args::empty(),
                    // A store target makes it a write: never answered here.
                    _ => super::args::syntax(),
                }
            }
            Cmd::Add { .. } => super::args::syntax(),
        })
    }
}

/// Replaces the destination of a stored search with the points found
/// (scores: their geohashes, or their distances with `STOREDIST`), or
/// deletes it when none was found; the reply's count.
fn store(
    st: &mut Store,
    cmd: SearchCommand,
    target: &StoreTarget,
    points: &[crate::data::geo::GeoPoint],
) -> i64 {
    let entries = store_entries(points, target);
    if entries.is_empty() {
        st.delete_with_event(&target.key);
        return 0;
    }
    let mut z = ZSet::default();
    for (member, score) in entries {
        z.insert(member, score);
    }
    st.put_value(&target.key, Value::ZSet(z), None);
    st.notify(NotifyFlags::ZSET, store_event(cmd), &target.key);
    points.len() as i64
}

impl super::run::Run for Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, _rng: &mut SplitMix) -> Reply {
        self.apply_inner(st, now).unwrap_or_else(|e| e)
    }
    fn read(&self, st: &Store, now: u64, _rng: &mut SplitMix) -> Reply {
        self.read_inner(st, now).unwrap_or_else(|e| e)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        Cmd::unchanged(self, st)
    }
    fn reads_only(&self) -> bool {
        Cmd::reads_only(self)
    }
}
