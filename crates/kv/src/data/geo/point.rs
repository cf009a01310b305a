//! The point commands: `GEOADD`, `GEOPOS`, `GEOHASH`, `GEODIST`.

use super::distance::{distance, format_coord, format_distance, Unit};
use super::error::GeoError;
use super::hash::{decode_score, geoadd_score, geohash_string, parse_lon_lat};
use super::number::keyword;
use crate::resp::Reply;
use crate::value::{Score, ZSet};

/// `GEOPOS` of one member: its (longitude, latitude) texts, `None` when
/// the key or the member is missing.
pub fn geopos(zset: Option<&ZSet>, member: &[u8]) -> Option<(String, String)> {
    let score = zset?.scores.get(member)?.get();
    let (lon, lat) = decode_score(score);
    Some((format_coord(lon), format_coord(lat)))
}

/// The whole `GEOPOS` reply (after the wiring's `WRONGTYPE` check): per
/// member a pair of doubles ([`Reply::Double`]: bulk strings in RESP2) or a
/// nil array.
pub fn geopos_reply<A: AsRef<[u8]>>(zset: Option<&ZSet>, members: &[A]) -> Reply {
    Reply::Array(Some(
        members
            .iter()
            .map(|m| match geopos(zset, m.as_ref()) {
                Some((lon, lat)) => {
                    Reply::Array(Some(vec![Reply::Double(lon), Reply::Double(lat)]))
                }
                None => Reply::Array(None),
            })
            .collect(),
    ))
}

/// `GEOHASH` of one member, `None` when the key or the member is missing.
pub fn geohash(zset: Option<&ZSet>, member: &[u8]) -> Option<String> {
    let score = zset?.scores.get(member)?.get();
    Some(geohash_string(score))
}

/// The whole `GEOHASH` reply: per member a bulk string or a nil.
pub fn geohash_reply<A: AsRef<[u8]>>(zset: Option<&ZSet>, members: &[A]) -> Reply {
    Reply::Array(Some(
        members
            .iter()
            .map(|m| match geohash(zset, m.as_ref()) {
                Some(h) => Reply::bulk(h),
                None => Reply::nil(),
            })
            .collect(),
    ))
}

/// `GEODIST key m1 m2 [unit]`: the unit, checked before the key is looked
/// up, as Redis does (`argv` is the whole command, name first): a fifth
/// argument is the unit, more is `ERR syntax error`.
pub fn parse_geodist<A: AsRef<[u8]>>(argv: &[A]) -> Result<Unit, GeoError> {
    match argv.len() {
        0..=3 => Err(GeoError::WrongArity("geodist".into())),
        4 => Ok(Unit::M),
        5 => Unit::parse(argv[4].as_ref()),
        _ => Err(GeoError::Syntax),
    }
}

/// `GEODIST`'s distance between two members in `unit`; `None` when either
/// is missing.
pub fn geodist(zset: &ZSet, m1: &[u8], m2: &[u8], unit: Unit) -> Option<f64> {
    let s1 = zset.scores.get(m1)?.get();
    let s2 = zset.scores.get(m2)?.get();
    let (lon1, lat1) = decode_score(s1);
    let (lon2, lat2) = decode_score(s2);
    Some(distance(lon1, lat1, lon2, lat2) / unit.to_meters())
}

/// The `GEODIST` reply (key missing: `None` → nil too): the distance as a
/// bulk string with 4 decimals, or nil.
pub fn geodist_reply(zset: Option<&ZSet>, m1: &[u8], m2: &[u8], unit: Unit) -> Reply {
    match zset.and_then(|z| geodist(z, m1, m2, unit)) {
        Some(d) => Reply::bulk(format_distance(d)),
        None => Reply::nil(),
    }
}

/// `GEOADD`'s parsed arguments: ZADD's flags and the (score, member) pairs
/// in argument order.
#[derive(Debug, Clone, PartialEq)]
pub struct GeoAdd {
    /// `NX`: only add new members.
    pub nx: bool,
    /// `XX`: only update existing members.
    pub xx: bool,
    /// `CH`: reply with added + changed.
    pub ch: bool,
    /// The members and their scores ([`geoadd_score`]).
    pub items: Vec<(Score, Vec<u8>)>,
}

/// Parses `GEOADD key [NX|XX] [CH] lon lat member ...` (`argv` is the
/// whole command). Options come first, in any order and repeated; then
/// a multiple of 3 arguments (else, or with both `NX` and `XX`, or with no
/// point at all, `ERR syntax error`); each point is checked in order
/// ([`parse_lon_lat`]'s errors).
pub fn parse_geoadd<A: AsRef<[u8]>>(argv: &[A]) -> Result<GeoAdd, GeoError> {
    if argv.len() < 5 {
        return Err(GeoError::WrongArity("geoadd".into()));
    }
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut at = 2;
    while at < argv.len() {
        let opt = argv[at].as_ref();
        if keyword(opt, "nx") {
            nx = true;
        } else if keyword(opt, "xx") {
            xx = true;
        } else if keyword(opt, "ch") {
            ch = true;
        } else {
            break;
        }
        at += 1;
    }
    let rest = &argv[at..];
    if rest.len() % 3 != 0 || (xx && nx) {
        return Err(GeoError::Syntax);
    }
    let mut items = Vec::with_capacity(rest.len() / 3);
    for p in rest.chunks_exact(3) {
        let (lon, lat) = parse_lon_lat(p[0].as_ref(), p[1].as_ref())?;
        let score = geoadd_score(lon, lat)
            .and_then(Score::new)
            .ok_or(GeoError::InvalidLonLat { lon, lat })?;
        items.push((score, p[2].as_ref().to_vec()));
    }
    if items.is_empty() {
        return Err(GeoError::Syntax); // ZADD's reply to no element
    }
    Ok(GeoAdd { nx, xx, ch, items })
}

/// Applies a parsed `GEOADD` to a sorted set with ZADD's semantics and
/// returns the reply's integer (added, or added + changed with `CH`). The
/// wiring creates the key only when it did not exist and `XX` is not given,
/// and never stores an empty set.
pub fn apply_geoadd(zset: &mut ZSet, add: &GeoAdd) -> i64 {
    let (mut added, mut changed) = (0i64, 0i64);
    for (score, member) in &add.items {
        match zset.scores.get(member).copied() {
            Some(old) => {
                if add.nx {
                    continue;
                }
                if old != *score {
                    zset.insert(member.clone(), *score);
                    changed += 1;
                }
            }
            None => {
                if add.xx {
                    continue;
                }
                zset.insert(member.clone(), *score);
                added += 1;
            }
        }
    }
    if add.ch {
        added + changed
    } else {
        added
    }
}
