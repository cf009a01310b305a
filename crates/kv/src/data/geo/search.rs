//! The search commands (`GEORADIUS*`, `GEOSEARCH`, `GEOSEARCHSTORE`):
//! parsing every option in Redis's order, running the search, its reply
//! and the entries to store.

use super::distance::Unit;
use super::error::GeoError;
use super::hash::{decode_score, parse_lon_lat};
use super::number::{keyword, parse_double};
use super::shape::{collect, sort_points, GeoPoint, Shape, ShapeKind, Sort};
use crate::resp::{parse_i64_strict, Reply};
use crate::value::{Score, ZSet};

/// Where a search's results go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreTarget {
    /// The destination key (`STORE key`, `STOREDIST key`, or
    /// `GEOSEARCHSTORE`'s first key).
    pub key: Vec<u8>,
    /// `STOREDIST`: store distances (in the unit) as scores instead of
    /// the geohashes.
    pub dist: bool,
}

/// A parsed search (any of the six search commands).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// Center, shape, unit.
    pub shape: Shape,
    /// `WITHDIST`.
    pub with_dist: bool,
    /// `WITHHASH`.
    pub with_hash: bool,
    /// `WITHCOORD`.
    pub with_coord: bool,
    /// `ASC`/`DESC` (the last given wins).
    pub sort: Sort,
    /// `COUNT n` (0: none).
    pub count: u64,
    /// `ANY`: stop scanning at `count` results.
    pub any: bool,
    /// `STORE`/`STOREDIST`/`GEOSEARCHSTORE`.
    pub store: Option<StoreTarget>,
}

/// What a search command does once parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchPlan {
    /// Run [`search`] over the source set.
    Run(SearchRequest),
    /// The source key does not exist: reply an empty array, or with a
    /// store target, delete the destination key (firing `del` if it
    /// existed) and reply 0.
    KeyMissing {
        /// The store target, if any.
        store: Option<StoreTarget>,
    },
}

/// The six search commands (they differ in their fixed arguments and in
/// the options they accept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchCommand {
    /// `GEORADIUS key lon lat radius unit [options]` (`STORE`,
    /// `STOREDIST` accepted).
    GeoRadius,
    /// `GEORADIUS_RO`: no store options.
    GeoRadiusRo,
    /// `GEORADIUSBYMEMBER key member radius unit [options]`.
    GeoRadiusByMember,
    /// `GEORADIUSBYMEMBER_RO`: no store options.
    GeoRadiusByMemberRo,
    /// `GEOSEARCH key FROMMEMBER m|FROMLONLAT lon lat BYRADIUS r unit|BYBOX
    /// w h unit [options]`.
    GeoSearch,
    /// `GEOSEARCHSTORE dst src ...` as `GEOSEARCH`, plus `STOREDIST`.
    GeoSearchStore,
}

impl SearchCommand {
    /// The index of the source key in argv.
    pub fn source_key_index(self) -> usize {
        match self {
            SearchCommand::GeoSearchStore => 2,
            _ => 1,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            SearchCommand::GeoRadius => "georadius",
            SearchCommand::GeoRadiusRo => "georadius_ro",
            SearchCommand::GeoRadiusByMember => "georadiusbymember",
            SearchCommand::GeoRadiusByMemberRo => "georadiusbymember_ro",
            SearchCommand::GeoSearch => "geosearch",
            SearchCommand::GeoSearchStore => "geosearchstore",
        }
    }

    pub(super) fn arity(self) -> usize {
        match self {
            SearchCommand::GeoRadius | SearchCommand::GeoRadiusRo => 6,
            SearchCommand::GeoRadiusByMember | SearchCommand::GeoRadiusByMemberRo => 5,
            SearchCommand::GeoSearch => 7,
            SearchCommand::GeoSearchStore => 8,
        }
    }
}

/// Parses a radius and its unit (`GEORADIUS*`, `BYRADIUS`).
pub(super) fn parse_radius(r: &[u8], unit: &[u8]) -> Result<(f64, Unit), GeoError> {
    let radius = parse_double(r).ok_or(GeoError::NeedNumericRadius)?;
    if radius < 0.0 {
        return Err(GeoError::NegativeRadius);
    }
    Ok((radius, Unit::parse(unit)?))
}

/// Parses `BYBOX`'s width, height and unit.
pub(super) fn parse_box(w: &[u8], h: &[u8], unit: &[u8]) -> Result<(f64, f64, Unit), GeoError> {
    let width = parse_double(w).ok_or(GeoError::NeedNumericWidth)?;
    let height = parse_double(h).ok_or(GeoError::NeedNumericHeight)?;
    if height < 0.0 || width < 0.0 {
        return Err(GeoError::NegativeBox);
    }
    Ok((width, height, Unit::parse(unit)?))
}

/// The decoded position of a member, or `could not decode requested zset
/// member`.
pub(super) fn member_center(zset: &ZSet, member: &[u8]) -> Result<(f64, f64), GeoError> {
    let score = zset.scores.get(member).ok_or(GeoError::MemberNotFound)?;
    Ok(decode_score(score.get()))
}

/// Parses a search command as Redis's `georadiusGeneric` does, with its
/// errors in its order. `argv` is the whole command (name first: the
/// `GEOSEARCH` errors quote it as typed); `zset` is the source set (at
/// [`SearchCommand::source_key_index`]) after the wiring's `WRONGTYPE`
/// check, `None` when the key does not exist (then the member of
/// `GEORADIUSBYMEMBER` and its radius, and `FROMMEMBER`'s member, are not
/// checked, as in Redis). Options are case-insensitive, in any order;
/// `COUNT` needs a positive integer; a later `ASC`/`DESC`, `COUNT`,
/// `STORE`, `FROMMEMBER` or `BYRADIUS`/`BYBOX` of the same kind replaces
/// an earlier one; `FROMMEMBER` with `FROMLONLAT`, and `BYRADIUS` with
/// `BYBOX`, is `ERR syntax error`.
pub fn parse_search<A: AsRef<[u8]>>(
    cmd: SearchCommand,
    argv: &[A],
    zset: Option<&ZSet>,
) -> Result<SearchPlan, GeoError> {
    if argv.len() < cmd.arity() {
        return Err(GeoError::WrongArity(cmd.name().into()));
    }
    let arg = |i: usize| argv[i].as_ref();
    let geosearch = matches!(
        cmd,
        SearchCommand::GeoSearch | SearchCommand::GeoSearchStore
    );
    let nostore = matches!(
        cmd,
        SearchCommand::GeoRadiusRo | SearchCommand::GeoRadiusByMemberRo
    );
    let mut center = (0.0, 0.0);
    let mut kind = ShapeKind::Radius(0.0);
    let mut unit = Unit::M;
    let mut store: Option<StoreTarget> = None;
    let base = match cmd {
        SearchCommand::GeoRadius | SearchCommand::GeoRadiusRo => {
            center = parse_lon_lat(arg(2), arg(3))?;
            let (r, u) = parse_radius(arg(4), arg(5))?;
            kind = ShapeKind::Radius(r);
            unit = u;
            6
        }
        SearchCommand::GeoRadiusByMember | SearchCommand::GeoRadiusByMemberRo => {
            if let Some(z) = zset {
                center = member_center(z, arg(2))?;
                let (r, u) = parse_radius(arg(3), arg(4))?;
                kind = ShapeKind::Radius(r);
                unit = u;
            }
            5
        }
        SearchCommand::GeoSearch => 2,
        SearchCommand::GeoSearchStore => {
            store = Some(StoreTarget {
                key: arg(1).to_vec(),
                dist: false,
            });
            3
        }
    };
    let (mut with_dist, mut with_hash, mut with_coord) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut any = false;
    let mut count: u64 = 0;
    let opts = &argv[base..];
    let remaining = opts.len();
    let mut i = 0;
    while i < remaining {
        let a = opts[i].as_ref();
        let next = |k: usize| opts[i + k].as_ref();
        if keyword(a, "withdist") {
            with_dist = true;
        } else if keyword(a, "withhash") {
            with_hash = true;
        } else if keyword(a, "withcoord") {
            with_coord = true;
        } else if keyword(a, "any") {
            any = true;
        } else if keyword(a, "asc") {
            sort = Sort::Asc;
        } else if keyword(a, "desc") {
            sort = Sort::Desc;
        } else if keyword(a, "count") && i + 1 < remaining {
            let n = parse_i64_strict(next(1)).ok_or(GeoError::NotInteger)?;
            if n <= 0 {
                return Err(GeoError::CountNotPositive);
            }
            count = n as u64;
            i += 1;
        } else if keyword(a, "store") && i + 1 < remaining && !nostore && !geosearch {
            store = Some(StoreTarget {
                key: next(1).to_vec(),
                dist: false,
            });
            i += 1;
        } else if keyword(a, "storedist") && i + 1 < remaining && !nostore && !geosearch {
            store = Some(StoreTarget {
                key: next(1).to_vec(),
                dist: true,
            });
            i += 1;
        } else if keyword(a, "storedist") && cmd == SearchCommand::GeoSearchStore {
            if let Some(s) = store.as_mut() {
                s.dist = true;
            }
        } else if keyword(a, "frommember") && i + 1 < remaining && geosearch && !fromloc {
            if let Some(z) = zset {
                center = member_center(z, next(1))?;
            }
            frommember = true;
            i += 1;
        } else if keyword(a, "fromlonlat") && i + 2 < remaining && geosearch && !frommember {
            center = parse_lon_lat(next(1), next(2))?;
            fromloc = true;
            i += 2;
        } else if keyword(a, "byradius") && i + 2 < remaining && geosearch && !bybox {
            let (r, u) = parse_radius(next(1), next(2))?;
            kind = ShapeKind::Radius(r);
            unit = u;
            byradius = true;
            i += 2;
        } else if keyword(a, "bybox") && i + 3 < remaining && geosearch && !byradius {
            let (w, h, u) = parse_box(next(1), next(2), next(3))?;
            kind = ShapeKind::Box {
                width: w,
                height: h,
            };
            unit = u;
            bybox = true;
            i += 3;
        } else {
            return Err(GeoError::Syntax);
        }
        i += 1;
    }
    if store.is_some() && (with_dist || with_hash || with_coord) {
        return Err(GeoError::StoreWithOptions {
            geosearchstore: cmd == SearchCommand::GeoSearchStore,
        });
    }
    let typed_name = || {
        let name = arg(0);
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        String::from_utf8_lossy(&name[..end]).into_owned()
    };
    if geosearch && !(frommember || fromloc) {
        return Err(GeoError::NeedFrom(typed_name()));
    }
    if geosearch && !(byradius || bybox) {
        return Err(GeoError::NeedBy(typed_name()));
    }
    if any && count == 0 {
        return Err(GeoError::AnyWithoutCount);
    }
    if zset.is_none() {
        return Ok(SearchPlan::KeyMissing { store });
    }
    Ok(SearchPlan::Run(SearchRequest {
        shape: Shape {
            lon: center.0,
            lat: center.1,
            kind,
            unit,
        },
        with_dist,
        with_hash,
        with_coord,
        sort,
        count,
        any,
        store,
    }))
}

/// Runs a search as Redis does: scan ([`collect`], stopping at `count`
/// with `ANY`), sort (`COUNT` without `ANY` or an order means `ASC`;
/// [`sort_points`]), keep the first `count`, distances converted to the
/// unit. The result is in reply (and store) order.
pub fn search(zset: &ZSet, req: &SearchRequest) -> Vec<GeoPoint> {
    let count = usize::try_from(req.count).unwrap_or(usize::MAX);
    let mut sort = req.sort;
    if count != 0 && sort == Sort::None && !req.any {
        sort = Sort::Asc;
    }
    let mut points = collect(zset, &req.shape, if req.any { count } else { 0 });
    let returned = if count == 0 || points.len() < count {
        points.len()
    } else {
        count
    };
    sort_points(&mut points, sort, returned);
    points.truncate(returned);
    let conv = req.shape.unit.to_meters();
    for p in &mut points {
        p.dist /= conv;
    }
    points
}

/// The reply of a search without a store target: per point its member
/// alone, or (with any `WITH*` option) an array of the member, then the
/// distance (bulk, 4 decimals), the hash (integer), the coordinates (two
/// doubles), in that order. No point: an empty array.
pub fn search_reply(points: &[GeoPoint], req: &SearchRequest) -> Reply {
    let options = req.with_dist || req.with_hash || req.with_coord;
    Reply::Array(Some(
        points
            .iter()
            .map(|p| {
                if !options {
                    return Reply::bulk(p.member.clone());
                }
                let mut item = vec![Reply::bulk(p.member.clone())];
                if req.with_dist {
                    item.push(Reply::bulk(p.dist_text()));
                }
                if req.with_hash {
                    item.push(Reply::Integer(p.hash()));
                }
                if req.with_coord {
                    let (lon, lat) = p.coord_texts();
                    item.push(Reply::Array(Some(vec![
                        Reply::Double(lon),
                        Reply::Double(lat),
                    ])));
                }
                Reply::Array(Some(item))
            })
            .collect(),
    ))
}

/// The members and scores a store target receives (the score is the
/// geohash, or with `STOREDIST` the distance in the unit), in order. The
/// wiring replaces the destination with a sorted set of them and replies
/// their number (firing `georadiusstore` or `geosearchstore`), or, when
/// there is none, deletes the destination (firing `del` if it existed)
/// and replies 0.
pub fn store_entries(points: &[GeoPoint], target: &StoreTarget) -> Vec<(Vec<u8>, Score)> {
    points
        .iter()
        .filter_map(|p| {
            let v = if target.dist { p.dist } else { p.score };
            Score::new(v).map(|s| (p.member.clone(), s))
        })
        .collect()
}
