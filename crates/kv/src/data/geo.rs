//! The computations behind Redis 7.0's `GEO*` commands, bit for bit.
//!
//! A geo set is a sorted set whose scores are 52-bit interleaved geohashes
//! (26 bits of longitude, 26 of latitude, latitude in the even bits),
//! stored as doubles. Everything here is a pure function of its inputs and
//! reproduces redis-server 7.0's arithmetic step by step (same operations
//! in the same order, the same libm calls, the same C conversions), so the
//! scores, positions, distances and search results equal Redis's to the
//! last printed digit.
//!
//! Which function serves which command:
//!
//! * `GEOADD`: [`parse_geoadd`] (options, coordinates → scores, errors),
//!   then [`apply_geoadd`] (ZADD's `NX`/`XX`/`CH` semantics on a [`ZSet`]).
//!   The score of one point is [`geoadd_score`] ([`encode`] at 26 steps).
//! * `GEOPOS`: [`geopos`] / [`geopos_reply`] ([`decode_score`] and
//!   [`format_coord`]).
//! * `GEOHASH`: [`geohash`] / [`geohash_reply`] ([`geohash_string`]).
//! * `GEODIST`: [`parse_geodist`], then [`geodist`] / [`geodist_reply`]
//!   ([`distance`], [`Unit`], [`format_distance`]).
//! * `GEORADIUS`, `GEORADIUS_RO`, `GEORADIUSBYMEMBER`,
//!   `GEORADIUSBYMEMBER_RO`, `GEOSEARCH`, `GEOSEARCHSTORE`:
//!   [`parse_search`] (every option, with Redis's errors in Redis's order)
//!   gives a [`SearchRequest`]; [`search`] runs it over the [`ZSet`] and
//!   gives the [`GeoPoint`]s in reply order; [`search_reply`] builds the
//!   reply (no `STORE`), [`store_entries`] the members and scores to store
//!   (`STORE`, `STOREDIST`, `GEOSEARCHSTORE`). The pieces of the search are
//!   public too: [`calculate_areas`] (the step estimate, the 9 cells, the
//!   exclusion of useless neighbors), [`SearchAreas::score_ranges`] (the
//!   score ranges scanned, in Redis's order), [`Shape::contains`] (the
//!   radius or box test and the distance), [`sort_points`] (Redis's
//!   `qsort`/`pqsort` by distance).
//!
//! What the wiring does (not here): arity is checked by the command table
//! (`GEOADD` -5, `GEODIST` -4, `GEOHASH` -2, `GEOPOS` -2, `GEORADIUS` -6,
//! `GEORADIUS_RO` -6, `GEORADIUSBYMEMBER` -5, `GEORADIUSBYMEMBER_RO` -5,
//! `GEOSEARCH` -7, `GEOSEARCHSTORE` -8; the parsers here also refuse a
//! short argv with [`GeoError::WrongArity`] instead of panicking); the key
//! lookup and its `WRONGTYPE` check come first, except for `GEODIST`,
//! whose unit is checked before the key ([`parse_geodist`]); the parsers
//! take the source sorted set as `Option<&ZSet>` because Redis resolves
//! `FROMMEMBER`/the member of `GEORADIUSBYMEMBER` while parsing, so its
//! errors come in the middle of the option errors.
//!
//! Texts follow Redis: coordinates as `%.17Lf` with trailing zeros cut
//! ([`format_coord`], a bulk string in RESP2 and a double in RESP3:
//! [`Reply::Double`]), distances with 4 decimals rounded as `llrint`
//! ([`format_distance`], always a bulk string), `WITHHASH` as the integer
//! score.

use crate::resp::{parse_i64_strict, Reply};
use crate::value::{Score, ZSet};
use std::ops::Bound;

/// Geohash precision of a stored score: 26 steps per axis, 52 bits.
pub const GEO_STEP_MAX: u8 = 26;
/// Southmost latitude a point may have (EPSG:900913's limit).
pub const GEO_LAT_MIN: f64 = -85.05112878;
/// Northmost latitude a point may have.
pub const GEO_LAT_MAX: f64 = 85.05112878;
/// Westmost longitude.
pub const GEO_LONG_MIN: f64 = -180.0;
/// Eastmost longitude.
pub const GEO_LONG_MAX: f64 = 180.0;
/// The earth radius of Redis's haversine, in meters.
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
/// The Mercator half-circumference Redis's step estimate doubles up to.
pub const MERCATOR_MAX: f64 = 20037726.37;

/// Degrees to radians as Redis computes it (`M_PI / 180.0`).
const D_R: f64 = std::f64::consts::PI / 180.0;
/// The alphabet of the standard geohash text (`GEOHASH`).
const GEOALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
const EVEN_BITS: u64 = 0x5555_5555_5555_5555;
const ODD_BITS: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// An error of a `GEO*` command; its text (`Display`) is Redis's, code
/// included (`ERR ...`), ready for [`Reply::err`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeoError {
    /// A longitude/latitude outside `[-180,180]` × `[-85.05112878,85.05112878]`
    /// (`GEOADD`, `GEORADIUS`, `FROMLONLAT`); printed with C's `%f`.
    #[error("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")]
    InvalidLonLat {
        /// The longitude given.
        lon: f64,
        /// The latitude given.
        lat: f64,
    },
    /// A coordinate that is not a double.
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// `COUNT`'s argument is not an integer.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// The radius is not a double.
    #[error("ERR need numeric radius")]
    NeedNumericRadius,
    /// `BYBOX`'s width is not a double.
    #[error("ERR need numeric width")]
    NeedNumericWidth,
    /// `BYBOX`'s height is not a double.
    #[error("ERR need numeric height")]
    NeedNumericHeight,
    /// A negative radius.
    #[error("ERR radius cannot be negative")]
    NegativeRadius,
    /// A negative width or height.
    #[error("ERR height or width cannot be negative")]
    NegativeBox,
    /// A unit other than m, km, ft, mi.
    #[error("ERR unsupported unit provided. please use M, KM, FT, MI")]
    BadUnit,
    /// `COUNT 0` or a negative count.
    #[error("ERR COUNT must be > 0")]
    CountNotPositive,
    /// An unknown or misplaced option.
    #[error("ERR syntax error")]
    Syntax,
    /// `GEORADIUSBYMEMBER`'s member or `FROMMEMBER`'s is not in the set.
    #[error("ERR could not decode requested zset member")]
    MemberNotFound,
    /// `STORE`/`STOREDIST`/`GEOSEARCHSTORE` with `WITHDIST`, `WITHHASH` or
    /// `WITHCOORD`; `geosearchstore` tells which text.
    #[error(
        "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
        store_option_name(*.geosearchstore)
    )]
    StoreWithOptions {
        /// True for `GEOSEARCHSTORE`, false for the `GEORADIUS` family.
        geosearchstore: bool,
    },
    /// `GEOSEARCH`/`GEOSEARCHSTORE` without `FROMMEMBER` or `FROMLONLAT`;
    /// carries the command name as the client typed it.
    #[error("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {0}")]
    NeedFrom(String),
    /// `GEOSEARCH`/`GEOSEARCHSTORE` without `BYRADIUS` or `BYBOX`.
    #[error("ERR exactly one of BYRADIUS and BYBOX can be specified for {0}")]
    NeedBy(String),
    /// `ANY` without `COUNT`.
    #[error("ERR the ANY argument requires COUNT argument")]
    AnyWithoutCount,
    /// Fewer arguments than the command's arity (normally refused by the
    /// command table first); carries the lowercase command name.
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
}

/// What the store error calls the store option.
fn store_option_name(geosearchstore: bool) -> &'static str {
    if geosearchstore {
        "GEOSEARCHSTORE"
    } else {
        "STORE option in GEORADIUS"
    }
}

// ---------------------------------------------------------------------------
// Parsing of numbers and keywords, as Redis does.

/// Parses a double exactly as Redis 7.0's `getDoubleFromObject`
/// (`string2d`: C's `strtod` over the whole argument): decimal or `0x`
/// hexadecimal, optional sign and exponent, `inf`/`infinity` in any case;
/// refused: NaN, leading or trailing spaces, junk, a value that overflows
/// to infinity or underflows to zero.
pub fn parse_double(b: &[u8]) -> Option<f64> {
    let (neg, rest) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let sign = |v: f64| if neg { -v } else { v };
    if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
        return Some(sign(f64::INFINITY));
    }
    if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        return parse_hex_double(&rest[2..]).map(sign);
    }
    // Decimal: digits [. digits] (at least one digit) [e [sign] digits].
    let mut i = 0;
    let mut digits = 0;
    let mut nonzero = false;
    while i < rest.len() && rest[i].is_ascii_digit() {
        nonzero |= rest[i] != b'0';
        digits += 1;
        i += 1;
    }
    if i < rest.len() && rest[i] == b'.' {
        i += 1;
        while i < rest.len() && rest[i].is_ascii_digit() {
            nonzero |= rest[i] != b'0';
            digits += 1;
            i += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if i < rest.len() && (rest[i] | 0x20) == b'e' {
        i += 1;
        if i < rest.len() && (rest[i] == b'+' || rest[i] == b'-') {
            i += 1;
        }
        let start = i;
        while i < rest.len() && rest[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    if i != rest.len() {
        return None;
    }
    let text = std::str::from_utf8(rest).ok()?;
    let v: f64 = text.parse().ok()?;
    if v.is_infinite() || (v == 0.0 && nonzero) {
        return None; // strtod's ERANGE with HUGE_VAL or zero
    }
    Some(sign(v))
}

/// The magnitude of a C hexadecimal float after its `0x`, rounded to
/// nearest-even as `strtod` does; `None` for bad syntax, overflow or
/// underflow to zero.
fn parse_hex_double(s: &[u8]) -> Option<f64> {
    let mut mant: u64 = 0;
    let mut sticky = false;
    let mut exp: i64 = 0;
    let mut any_digit = false;
    let mut seen_dot = false;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            b'.' if !seen_dot => {
                seen_dot = true;
                i += 1;
                continue;
            }
            _ => break,
        };
        any_digit = true;
        if mant >> 60 == 0 {
            mant = mant * 16 + u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_dot {
                exp += 4;
            }
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if i < s.len() && (s[i] | 0x20) == b'p' {
        i += 1;
        let mut eneg = false;
        if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
            eneg = s[i] == b'-';
            i += 1;
        }
        let start = i;
        let mut e: i64 = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            e = (e * 10 + i64::from(s[i] - b'0')).min(1_000_000);
            i += 1;
        }
        if i == start {
            return None;
        }
        exp += if eneg { -e } else { e };
    }
    if i != s.len() {
        return None;
    }
    if mant == 0 {
        return Some(0.0);
    }
    let lz = mant.leading_zeros();
    let m = mant << lz;
    let e2 = exp - i64::from(lz); // value = m * 2^e2, m in [2^63, 2^64)
    let top = e2 + 63;
    if top > 1023 {
        return None;
    }
    let keep: i64 = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    let shift = 64 - keep; // >= 11
    let r: u64 = if shift > 64 {
        0
    } else {
        let (kept, rem) = if shift == 64 {
            (0, m)
        } else {
            (m >> shift, m & ((1u64 << shift) - 1))
        };
        let half = 1u64 << (shift - 1);
        let up = rem > half || (rem == half && (sticky || kept & 1 == 1));
        kept + u64::from(up)
    };
    if r == 0 {
        return None;
    }
    let k = e2 + shift; // value = r * 2^k
    let f = r as f64;
    let v = if k >= -1022 {
        f * pow2(k.min(1023))
    } else {
        f * pow2(k + 64) * pow2(-64)
    };
    if v.is_infinite() {
        return None;
    }
    Some(v)
}

/// 2^k for k in [-1022, 1023].
fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// True when `arg` equals `word` ignoring ASCII case, compared as C's
/// `strcasecmp` does (the argument ends at its first NUL byte).
fn keyword(arg: &[u8], word: &str) -> bool {
    let end = arg.iter().position(|&c| c == 0).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(word.as_bytes())
}

/// C's `(uint64_t)d` as x86-64 code computes it (also for the values C
/// leaves undefined: negative, too large, infinite), which is how Redis
/// turns any score into geohash bits.
pub fn c_double_to_u64(d: f64) -> u64 {
    if d.is_nan() {
        return 1 << 63;
    }
    if d < TWO_POW_63 {
        c_double_to_i64(d) as u64
    } else {
        (c_double_to_i64(d - TWO_POW_63) as u64) ^ (1 << 63)
    }
}

/// C's `(long long)d` on x86-64 (`cvttsd2si`): truncation, and `i64::MIN`
/// for anything out of range (`WITHHASH` prints a score so).
pub fn c_double_to_i64(d: f64) -> i64 {
    if (-TWO_POW_63..TWO_POW_63).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

// ---------------------------------------------------------------------------
// Geohash bits.

/// A geohash: `2 * step` bits, latitude in the even bits (bit 0 is the
/// latitude's lowest), longitude in the odd ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashBits {
    /// The interleaved bits.
    pub bits: u64,
    /// Bits per axis (1..=26 in every use here).
    pub step: u8,
}

/// A closed range of one coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoordRange {
    /// Lower end.
    pub min: f64,
    /// Upper end.
    pub max: f64,
}

impl CoordRange {
    fn is_zero(self) -> bool {
        self.min == 0.0 && self.max == 0.0
    }
}

/// Redis's longitude range for stored hashes.
pub const LONG_RANGE: CoordRange = CoordRange {
    min: GEO_LONG_MIN,
    max: GEO_LONG_MAX,
};
/// Redis's latitude range for stored hashes (not ±90).
pub const LAT_RANGE: CoordRange = CoordRange {
    min: GEO_LAT_MIN,
    max: GEO_LAT_MAX,
};
/// The standard latitude range, used to print `GEOHASH` strings.
pub const STANDARD_LAT_RANGE: CoordRange = CoordRange {
    min: -90.0,
    max: 90.0,
};

/// The cell a geohash stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HashArea {
    /// The hash.
    pub hash: HashBits,
    /// Its longitudes.
    pub longitude: CoordRange,
    /// Its latitudes.
    pub latitude: CoordRange,
}

/// Spreads the 32 bits of `lat` over the even bits and those of `lon` over
/// the odd bits.
fn interleave(lat: u32, lon: u32) -> u64 {
    let mut out = 0u64;
    for i in 0..32 {
        out |= u64::from((lat >> i) & 1) << (2 * i);
        out |= u64::from((lon >> i) & 1) << (2 * i + 1);
    }
    out
}

/// The inverse of [`interleave`]: (latitude bits, longitude bits).
fn deinterleave(v: u64) -> (u32, u32) {
    let (mut lat, mut lon) = (0u32, 0u32);
    for i in 0..32 {
        lat |= (((v >> (2 * i)) & 1) as u32) << i;
        lon |= (((v >> (2 * i + 1)) & 1) as u32) << i;
    }
    (lat, lon)
}

/// C's `(uint32_t)d` for `0 <= d <= 2^32` as x86-64 computes it (through a
/// 64-bit conversion, so `2^32` wraps to 0).
fn c_double_to_u32(d: f64) -> u32 {
    c_double_to_i64(d) as u32
}

/// Redis's `geohashEncode`: the hash of (`lon`, `lat`) at `step` bits per
/// axis within the given ranges. `None` where Redis fails: step not in
/// 1..=32, a zero range, a point outside Redis's limits
/// ([`GEO_LAT_MIN`]..[`GEO_LAT_MAX`], ±180) or outside the ranges.
/// A point on the upper edge of a range gets the out-of-range index
/// `2^step`, as in Redis.
// Comparisons as Redis writes them (a NaN passes them, as in C).
#[allow(clippy::manual_range_contains)]
pub fn encode_in(
    long_range: CoordRange,
    lat_range: CoordRange,
    lon: f64,
    lat: f64,
    step: u8,
) -> Option<HashBits> {
    if step == 0 || step > 32 || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    if lon > GEO_LONG_MAX || lon < GEO_LONG_MIN || lat > GEO_LAT_MAX || lat < GEO_LAT_MIN {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < long_range.min || lon > long_range.max {
        return None;
    }
    let mut lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (lon - long_range.min) / (long_range.max - long_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    long_offset *= scale;
    Some(HashBits {
        bits: interleave(c_double_to_u32(lat_offset), c_double_to_u32(long_offset)),
        step,
    })
}

/// [`encode_in`] with Redis's ranges ([`LONG_RANGE`], [`LAT_RANGE`]).
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<HashBits> {
    encode_in(LONG_RANGE, LAT_RANGE, lon, lat, step)
}

/// Redis's `geohashDecode`: the cell of `hash` within the given ranges.
/// `None` for a zero hash (bits and step 0), a zero range, or a step over
/// 32.
pub fn decode_in(
    long_range: CoordRange,
    lat_range: CoordRange,
    hash: HashBits,
) -> Option<HashArea> {
    if (hash.bits == 0 && hash.step == 0) || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    if hash.step > 32 {
        return None;
    }
    let (ilat, ilon) = deinterleave(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let div = (1u64 << hash.step) as f64;
    let at = |i: u32, min: f64, scale: f64| min + (f64::from(i) / div) * scale;
    Some(HashArea {
        hash,
        latitude: CoordRange {
            min: at(ilat, lat_range.min, lat_scale),
            max: at(ilat.wrapping_add(1), lat_range.min, lat_scale),
        },
        longitude: CoordRange {
            min: at(ilon, long_range.min, long_scale),
            max: at(ilon.wrapping_add(1), long_range.min, long_scale),
        },
    })
}

/// [`decode_in`] with Redis's ranges.
pub fn decode(hash: HashBits) -> Option<HashArea> {
    decode_in(LONG_RANGE, LAT_RANGE, hash)
}

/// The center of a cell, clamped to Redis's limits: (longitude, latitude).
pub fn area_center(area: &HashArea) -> (f64, f64) {
    let lon = (area.longitude.min + area.longitude.max) / 2.0;
    let lat = (area.latitude.min + area.latitude.max) / 2.0;
    (
        lon.clamp(GEO_LONG_MIN, GEO_LONG_MAX),
        lat.clamp(GEO_LAT_MIN, GEO_LAT_MAX),
    )
}

/// The position a score stands for: the center of its 26-step cell,
/// (longitude, latitude), as `GEOPOS` and the searches decode any score
/// (a score that is not a 52-bit integer is converted as C converts it).
pub fn decode_score(score: f64) -> (f64, f64) {
    let hash = HashBits {
        bits: c_double_to_u64(score),
        step: GEO_STEP_MAX,
    };
    match decode(hash) {
        Some(area) => area_center(&area),
        None => (0.0, 0.0), // unreachable: step is never 0
    }
}

/// Checks a point against Redis's limits (`GEOADD`, `GEORADIUS`,
/// `FROMLONLAT`): `ERR invalid longitude,latitude pair ...`.
// Comparisons as Redis writes them (a NaN passes them, as in C).
#[allow(clippy::manual_range_contains)]
pub fn check_lon_lat(lon: f64, lat: f64) -> Result<(), GeoError> {
    if lon < GEO_LONG_MIN || lon > GEO_LONG_MAX || lat < GEO_LAT_MIN || lat > GEO_LAT_MAX {
        return Err(GeoError::InvalidLonLat { lon, lat });
    }
    Ok(())
}

/// Parses a longitude and a latitude argument and checks them, with
/// Redis's errors in its order (`value is not a valid float` for either,
/// then the range).
pub fn parse_lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), GeoError> {
    let lon = parse_double(lon).ok_or(GeoError::NotFloat)?;
    let lat = parse_double(lat).ok_or(GeoError::NotFloat)?;
    check_lon_lat(lon, lat)?;
    Ok((lon, lat))
}

/// The score `GEOADD` stores for a point (already checked with
/// [`check_lon_lat`]): its 52-bit hash as a double. `None` outside the
/// limits.
pub fn geoadd_score(lon: f64, lat: f64) -> Option<f64> {
    let hash = encode(lon, lat, GEO_STEP_MAX)?;
    Some(align_52_bits(hash) as f64)
}

/// A hash's bits shifted to the 52-bit score scale.
pub fn align_52_bits(hash: HashBits) -> u64 {
    let shift = 52u32.saturating_sub(2 * u32::from(hash.step));
    hash.bits << shift
}

/// The scores of the members inside a cell: `[min, max)` as integers.
pub fn score_range(hash: HashBits) -> (u64, u64) {
    let min = align_52_bits(hash);
    let max = align_52_bits(HashBits {
        bits: hash.bits.wrapping_add(1),
        step: hash.step,
    });
    (min, max)
}

/// The 11-character standard geohash `GEOHASH` prints for a score: the
/// decoded position re-encoded over ±90 latitude, 10 base-32 characters of
/// its 52 bits and a final `0`.
pub fn geohash_string(score: f64) -> String {
    let (lon, lat) = decode_score(score);
    let bits = encode_in(LONG_RANGE, STANDARD_LAT_RANGE, lon, lat, GEO_STEP_MAX)
        .map(|h| h.bits)
        .unwrap_or(0);
    let mut out = String::with_capacity(11);
    for i in 0..11u32 {
        let idx = if i == 10 {
            0
        } else {
            ((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize
        };
        out.push(char::from(GEOALPHABET[idx]));
    }
    out
}

// ---------------------------------------------------------------------------
// Neighbors.

/// One cell east (`d > 0`) or west (`d < 0`), wrapping around.
fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 || hash.step == 0 || hash.step > 32 {
        return;
    }
    let shift = 64 - 2 * u32::from(hash.step);
    let mut x = hash.bits & ODD_BITS;
    let y = hash.bits & EVEN_BITS;
    let fill = EVEN_BITS >> shift;
    if d > 0 {
        x = x.wrapping_add(fill + 1);
    } else {
        x = (x | fill).wrapping_sub(fill + 1);
    }
    x &= ODD_BITS >> shift;
    hash.bits = x | y;
}

/// One cell north (`d > 0`) or south (`d < 0`), wrapping around.
fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 || hash.step == 0 || hash.step > 32 {
        return;
    }
    let shift = 64 - 2 * u32::from(hash.step);
    let x = hash.bits & ODD_BITS;
    let mut y = hash.bits & EVEN_BITS;
    let fill = ODD_BITS >> shift;
    if d > 0 {
        y = y.wrapping_add(fill + 1);
    } else {
        y = (y | fill).wrapping_sub(fill + 1);
    }
    y &= EVEN_BITS >> shift;
    hash.bits = x | y;
}

/// The 8 cells around a hash (Redis's `geohashNeighbors`, wrapping at the
/// edges of the map as Redis does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbors {
    /// North.
    pub north: HashBits,
    /// East.
    pub east: HashBits,
    /// West.
    pub west: HashBits,
    /// South.
    pub south: HashBits,
    /// North-east.
    pub north_east: HashBits,
    /// South-east.
    pub south_east: HashBits,
    /// North-west.
    pub north_west: HashBits,
    /// South-west.
    pub south_west: HashBits,
}

/// The neighbors of `hash` (step 1..=32; other steps give `hash` itself).
pub fn neighbors(hash: HashBits) -> Neighbors {
    let at = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: at(1, 0),
        west: at(-1, 0),
        south: at(0, -1),
        north: at(0, 1),
        north_west: at(-1, 1),
        north_east: at(1, 1),
        south_east: at(1, -1),
        south_west: at(-1, -1),
    }
}

// ---------------------------------------------------------------------------
// Distances and units.

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// The distance in meters between two latitudes on a meridian.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Redis's haversine distance in meters between two points (degrees), as
/// `GEODIST` and the searches compute it.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// A distance unit of the `GEO*` commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Meters (`m`).
    M,
    /// Kilometers (`km`).
    Km,
    /// Feet (`ft`).
    Ft,
    /// Miles (`mi`).
    Mi,
}

impl Unit {
    /// Parses a unit in any case; `ERR unsupported unit provided...`.
    pub fn parse(b: &[u8]) -> Result<Unit, GeoError> {
        if keyword(b, "m") {
            Ok(Unit::M)
        } else if keyword(b, "km") {
            Ok(Unit::Km)
        } else if keyword(b, "ft") {
            Ok(Unit::Ft)
        } else if keyword(b, "mi") {
            Ok(Unit::Mi)
        } else {
            Err(GeoError::BadUnit)
        }
    }

    /// Meters per unit (Redis's factors: 1, 1000, 0.3048, 1609.34).
    pub fn to_meters(self) -> f64 {
        match self {
            Unit::M => 1.0,
            Unit::Km => 1000.0,
            Unit::Ft => 0.3048,
            Unit::Mi => 1609.34,
        }
    }
}

// ---------------------------------------------------------------------------
// Texts.

/// A coordinate as Redis prints it (`addReplyHumanLongDouble`: `%.17Lf`,
/// trailing zeros and a trailing dot cut, `-0` printed `0`).
pub fn format_coord(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// A distance as Redis prints it (`WITHDIST`, `GEODIST`): 4 decimals, the
/// value times 10000 rounded half-to-even (`llrint`).
pub fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".into();
    }
    let scaled = (d * 10000.0).round_ties_even();
    let svalue = if (-TWO_POW_63..TWO_POW_63).contains(&scaled) {
        scaled as i64
    } else {
        i64::MIN
    };
    let neg = svalue < 0;
    let value = svalue.unsigned_abs();
    format!(
        "{}{}.{:04}",
        if neg { "-" } else { "" },
        value / 10000,
        value % 10000
    )
}

// ---------------------------------------------------------------------------
// Point commands.

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

// ---------------------------------------------------------------------------
// Search.

/// The shape of a search, without its center.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShapeKind {
    /// `BYRADIUS` / `GEORADIUS*`: a radius, in the shape's unit.
    Radius(f64),
    /// `BYBOX`: width × height, in the shape's unit.
    Box {
        /// East-west extent.
        width: f64,
        /// North-south extent.
        height: f64,
    },
}

/// A search area: its center, its shape and unit (Redis's `GeoShape`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Center longitude.
    pub lon: f64,
    /// Center latitude.
    pub lat: f64,
    /// Radius or box, in `unit`.
    pub kind: ShapeKind,
    /// The unit of the sizes and of the distances replied.
    pub unit: Unit,
}

/// A point of the set inside the search area.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Decoded longitude.
    pub lon: f64,
    /// Decoded latitude.
    pub lat: f64,
    /// Distance from the center, in meters.
    pub dist_m: f64,
}

impl Shape {
    fn conversion(&self) -> f64 {
        self.unit.to_meters()
    }

    /// Redis's `geohashBoundingBox`: `[min_lon, min_lat, max_lon,
    /// max_lat]` of the search area (the longitudes measured at the
    /// latitude edge farther from the equator, with Redis's formulas).
    pub fn bounding_box(&self) -> [f64; 4] {
        let conv = self.conversion();
        let (height, width) = match self.kind {
            ShapeKind::Radius(r) => (conv * r, conv * r),
            ShapeKind::Box { width, height } => (conv * (height / 2.0), conv * (width / 2.0)),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.lat + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.lat - lat_delta).cos());
        let southern = self.lat < 0.0;
        let long_delta = if southern {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            self.lon - long_delta,
            self.lat - lat_delta,
            self.lon + long_delta,
            self.lat + lat_delta,
        ]
    }

    /// The radius used to choose the geohash step, in meters (a box's
    /// half diagonal).
    pub fn radius_meters(&self) -> f64 {
        let r = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        r * self.conversion()
    }

    /// Redis's `geoWithinShape`: whether a member of score `score` is in
    /// the area (radius: distance ≤ radius; box: latitude distance ≤
    /// height/2 and the distance along the point's parallel ≤ width/2),
    /// with its decoded position and distance from the center.
    pub fn contains(&self, score: f64) -> Option<Hit> {
        let (lon, lat) = decode_score(score);
        let conv = self.conversion();
        match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                if d > r * conv {
                    return None;
                }
                Some(Hit {
                    lon,
                    lat,
                    dist_m: d,
                })
            }
            ShapeKind::Box { width, height } => {
                let width_m = width * conv;
                let height_m = height * conv;
                if lat_distance(lat, self.lat) > height_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width_m / 2.0 {
                    return None;
                }
                Some(Hit {
                    lon,
                    lat,
                    dist_m: distance(self.lon, self.lat, lon, lat),
                })
            }
        }
    }
}

/// Redis's `geohashEstimateStepsByRadius`: the step of the 9 cells of a
/// search of `range_meters` around latitude `lat` (1..=26).
// Comparisons as Redis writes them (a NaN passes them, as in C).
#[allow(clippy::manual_range_contains)]
pub fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range = range_meters;
    let mut step: i32 = 1;
    // (`range > 0` only guards a negative radius given directly, which
    // Redis's parser refuses; it changes nothing for a valid one.)
    while range > 0.0 && range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if lat > 66.0 || lat < -66.0 {
        step -= 1;
        if lat > 80.0 || lat < -80.0 {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The cells a search scans (Redis's `GeoHashRadius`): the center's cell
/// and its 8 neighbors, `None` for the neighbors Redis excludes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchAreas {
    /// The center's cell.
    pub hash: HashBits,
    /// Its extent.
    pub area: HashArea,
    /// North, south, east, west, north-east, north-west, south-east,
    /// south-west: Redis's scan order after the center.
    pub neighbors: [Option<HashBits>; 8],
    /// The search's bounding box ([`Shape::bounding_box`]).
    pub bounds: [f64; 4],
}

impl SearchAreas {
    /// The cells scanned, in Redis's order: the center, then the
    /// neighbors that are not excluded, each skipped when it equals the
    /// last cell scanned before it among the neighbors (at step 1 the
    /// neighbors wrap around the map and coincide).
    pub fn cells(&self) -> Vec<HashBits> {
        let all: [Option<HashBits>; 9] = [
            Some(self.hash),
            self.neighbors[0],
            self.neighbors[1],
            self.neighbors[2],
            self.neighbors[3],
            self.neighbors[4],
            self.neighbors[5],
            self.neighbors[6],
            self.neighbors[7],
        ];
        let mut out = Vec::with_capacity(9);
        let mut last = 0usize;
        for (i, cell) in all.iter().enumerate() {
            let Some(h) = *cell else { continue };
            if last != 0 && all[last] == Some(h) {
                continue;
            }
            out.push(h);
            last = i;
        }
        out
    }

    /// The score ranges scanned, `[min, max)`, in scan order.
    pub fn score_ranges(&self) -> Vec<(f64, f64)> {
        self.cells()
            .into_iter()
            .map(|h| {
                let (min, max) = score_range(h);
                (min as f64, max as f64)
            })
            .collect()
    }
}

/// Redis's `geohashCalculateAreasByShapeWGS84`: the step from the radius
/// (one less when a side cell does not reach the bounding box), the
/// center's cell, its neighbors, and (from step 2) the exclusion of the
/// neighbors beyond the bounding box.
pub fn calculate_areas(shape: &Shape) -> SearchAreas {
    let bounds = shape.bounding_box();
    let [min_lon, min_lat, max_lon, max_lat] = bounds;
    let mut steps = estimate_steps_by_radius(shape.radius_meters(), shape.lat);
    let cell = |steps: u8| {
        let hash = encode(shape.lon, shape.lat, steps).unwrap_or(HashBits {
            bits: 0,
            step: steps,
        });
        let n = neighbors(hash);
        let area = decode(hash).unwrap_or(HashArea {
            hash,
            longitude: LONG_RANGE,
            latitude: LAT_RANGE,
        });
        (hash, n, area)
    };
    let (mut hash, mut n, mut area) = cell(steps);
    let reaches =
        |h: HashBits, f: &dyn Fn(&HashArea) -> bool| decode(h).map(|a| f(&a)).unwrap_or(false);
    let decrease = reaches(n.north, &|a| a.latitude.max < max_lat)
        || reaches(n.south, &|a| a.latitude.min > min_lat)
        || reaches(n.east, &|a| a.longitude.max < max_lon)
        || reaches(n.west, &|a| a.longitude.min > min_lon);
    if steps > 1 && decrease {
        steps -= 1;
        (hash, n, area) = cell(steps);
    }
    // Order: N, S, E, W, NE, NW, SE, SW.
    let mut cells = [
        Some(n.north),
        Some(n.south),
        Some(n.east),
        Some(n.west),
        Some(n.north_east),
        Some(n.north_west),
        Some(n.south_east),
        Some(n.south_west),
    ];
    if steps >= 2 {
        let mut exclude = |idx: [usize; 3]| {
            for i in idx {
                cells[i] = None;
            }
        };
        if area.latitude.min < min_lat {
            exclude([1, 7, 6]);
        }
        if area.latitude.max > max_lat {
            exclude([0, 4, 5]);
        }
        if area.longitude.min < min_lon {
            exclude([3, 7, 5]);
        }
        if area.longitude.max > max_lon {
            exclude([2, 6, 4]);
        }
    }
    SearchAreas {
        hash,
        area,
        neighbors: cells,
        bounds,
    }
}

/// A member found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct GeoPoint {
    /// The member.
    pub member: Vec<u8>,
    /// Its score (`WITHHASH`, `STORE`).
    pub score: f64,
    /// Decoded longitude (`WITHCOORD`).
    pub lon: f64,
    /// Decoded latitude.
    pub lat: f64,
    /// Distance from the center: in meters from [`collect`], in the
    /// search's unit from [`search`] (`WITHDIST`, `STOREDIST`).
    pub dist: f64,
}

impl GeoPoint {
    /// `WITHDIST`'s text.
    pub fn dist_text(&self) -> String {
        format_distance(self.dist)
    }

    /// `WITHHASH`'s integer (the score converted as C converts it).
    pub fn hash(&self) -> i64 {
        c_double_to_i64(self.score)
    }

    /// `WITHCOORD`'s texts: (longitude, latitude).
    pub fn coord_texts(&self) -> (String, String) {
        (format_coord(self.lon), format_coord(self.lat))
    }
}

/// Redis's scan (`membersOfAllNeighbors`): every member whose score lies
/// in a scanned range, in scan order (ranges in [`SearchAreas::cells`]
/// order, each by score then member), kept when [`Shape::contains`] it,
/// distances in meters. With `limit > 0` (`COUNT n ANY`) the scan stops as
/// soon as `limit` members are kept. (With Redis's skipping of a
/// neighbor equal to the last cell scanned, the cells scanned are always
/// distinct, so no member is found twice.)
pub fn collect(zset: &ZSet, shape: &Shape, limit: usize) -> Vec<GeoPoint> {
    let areas = calculate_areas(shape);
    let mut out: Vec<GeoPoint> = Vec::new();
    let full = |out: &Vec<GeoPoint>| limit != 0 && out.len() >= limit;
    for (min, max) in areas.score_ranges() {
        if full(&out) {
            break;
        }
        let Some(start) = Score::new(min) else {
            continue;
        };
        let from = (start, Vec::new());
        for (score, member) in zset.order.range((Bound::Included(from), Bound::Unbounded)) {
            let s = score.get();
            if s >= max {
                break;
            }
            if let Some(hit) = shape.contains(s) {
                out.push(GeoPoint {
                    member: member.clone(),
                    score: s,
                    lon: hit.lon,
                    lat: hit.lat,
                    dist: hit.dist_m,
                });
            }
            if full(&out) {
                break;
            }
        }
    }
    out
}

/// The order of a search's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// No order asked: scan order (unless `COUNT` without `ANY`, which
    /// [`search`] turns into [`Sort::Asc`] as Redis does).
    None,
    /// `ASC`: nearest first.
    Asc,
    /// `DESC`: farthest first.
    Desc,
}

/// Redis's comparison of two points by distance (`sort_gp_asc`).
fn cmp_dist(a: &GeoPoint, b: &GeoPoint) -> i32 {
    if a.dist > b.dist {
        1
    } else if a.dist == b.dist {
        0
    } else {
        -1
    }
}

/// Sorts points by distance as Redis does: when all are returned, with
/// the C library's `qsort` (glibc's stable merge sort: ties keep scan
/// order, also for `DESC`); when only the first `keep` are returned
/// (`COUNT` below the number found), with Redis's partial quicksort
/// (`pqsort`), whose order of ties this reproduces. `Sort::None` leaves
/// the order.
pub fn sort_points(points: &mut [GeoPoint], sort: Sort, keep: usize) {
    let sign = match sort {
        Sort::None => return,
        Sort::Asc => 1,
        Sort::Desc => -1,
    };
    let cmp = |a: &GeoPoint, b: &GeoPoint| sign * cmp_dist(a, b);
    if keep >= points.len() {
        points.sort_by(|a, b| cmp(a, b).cmp(&0));
    } else if keep > 0 {
        partial_quicksort(points, &cmp, 0, points.len(), 0, keep - 1);
    }
}

/// Bentley & McIlroy's quicksort of `v[lo..lo + n]`, sorting only the
/// parts that overlap elements `lrange..=rrange` (Redis's `pqsort`; all
/// indices are `v`'s).
fn partial_quicksort<T>(
    v: &mut [T],
    cmp: &dyn Fn(&T, &T) -> i32,
    mut lo: usize,
    mut n: usize,
    lrange: usize,
    rrange: usize,
) {
    let c = |v: &[T], i: usize, j: usize| cmp(&v[i], &v[j]);
    let med3 = |v: &[T], a: usize, b: usize, d: usize| -> usize {
        if c(v, a, b) < 0 {
            if c(v, b, d) < 0 {
                b
            } else if c(v, a, d) < 0 {
                d
            } else {
                a
            }
        } else if c(v, b, d) > 0 {
            b
        } else if c(v, a, d) < 0 {
            a
        } else {
            d
        }
    };
    let overlaps = |start: usize, len: usize| !(rrange < start || lrange >= start + len);
    loop {
        if n < 7 {
            for m in lo + 1..lo + n {
                let mut l = m;
                while l > lo && c(v, l - 1, l) > 0 {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let mut pm = lo + n / 2;
        if n > 7 {
            let mut pl = lo;
            let mut pn = lo + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d);
                pm = med3(v, pm - d, pm, pm + d);
                pn = med3(v, pn - 2 * d, pn - d, pn);
            }
            pm = med3(v, pl, pm, pn);
        }
        v.swap(lo, pm);
        let (mut pa, mut pb) = (lo + 1, lo + 1);
        let (mut pc, mut pd) = (lo + n - 1, lo + n - 1);
        loop {
            while pb <= pc {
                let r = c(v, pb, lo);
                if r > 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = c(v, pc, lo);
                if r < 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        // Move the runs equal to the pivot from the ends to the middle.
        let pn = lo + n;
        let r = (pa - lo).min(pb - pa);
        for k in 0..r {
            v.swap(lo + k, pb - r + k);
        }
        let r = (pd - pc).min(pn - pd - 1);
        for k in 0..r {
            v.swap(pb + k, pn - r + k);
        }
        let r = pb - pa;
        if r > 1 && overlaps(lo, r) {
            partial_quicksort(v, cmp, lo, r, lrange, rrange);
        }
        let r = pd - pc;
        if r > 1 {
            lo = pn - r;
            n = r;
            if overlaps(lo, n) {
                continue;
            }
        }
        return;
    }
}

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

    fn name(self) -> &'static str {
        match self {
            SearchCommand::GeoRadius => "georadius",
            SearchCommand::GeoRadiusRo => "georadius_ro",
            SearchCommand::GeoRadiusByMember => "georadiusbymember",
            SearchCommand::GeoRadiusByMemberRo => "georadiusbymember_ro",
            SearchCommand::GeoSearch => "geosearch",
            SearchCommand::GeoSearchStore => "geosearchstore",
        }
    }

    fn arity(self) -> usize {
        match self {
            SearchCommand::GeoRadius | SearchCommand::GeoRadiusRo => 6,
            SearchCommand::GeoRadiusByMember | SearchCommand::GeoRadiusByMemberRo => 5,
            SearchCommand::GeoSearch => 7,
            SearchCommand::GeoSearchStore => 8,
        }
    }
}

/// Parses a radius and its unit (`GEORADIUS*`, `BYRADIUS`).
fn parse_radius(r: &[u8], unit: &[u8]) -> Result<(f64, Unit), GeoError> {
    let radius = parse_double(r).ok_or(GeoError::NeedNumericRadius)?;
    if radius < 0.0 {
        return Err(GeoError::NegativeRadius);
    }
    Ok((radius, Unit::parse(unit)?))
}

/// Parses `BYBOX`'s width, height and unit.
fn parse_box(w: &[u8], h: &[u8], unit: &[u8]) -> Result<(f64, f64, Unit), GeoError> {
    let width = parse_double(w).ok_or(GeoError::NeedNumericWidth)?;
    let height = parse_double(h).ok_or(GeoError::NeedNumericHeight)?;
    if height < 0.0 || width < 0.0 {
        return Err(GeoError::NegativeBox);
    }
    Ok((width, height, Unit::parse(unit)?))
}

/// The decoded position of a member, or `could not decode requested zset
/// member`.
fn member_center(zset: &ZSet, member: &[u8]) -> Result<(f64, f64), GeoError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn zset_of(points: &[(f64, f64, &str)]) -> ZSet {
        let mut z = ZSet::default();
        for &(lon, lat, m) in points {
            let s = geoadd_score(lon, lat).and_then(Score::new);
            if let Some(s) = s {
                z.insert(m.as_bytes().to_vec(), s);
            }
        }
        z
    }

    fn args(line: &str) -> Vec<Vec<u8>> {
        line.split_whitespace()
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn scores_and_positions_equal_redis() {
        // Values observed on redis-server 7.0.15.
        for (lon, lat, score, plon, plat, hash) in [
            (
                180.0,
                0.0,
                10133099161583616.0,
                "180",
                "0.00000126736058093",
                "80000000000",
            ),
            (
                -180.0,
                85.05112878,
                4503599627370496.0,
                "-179.99999731779098511",
                "85.0511287799999991",
                "bp05b5048p0",
            ),
            (
                0.0,
                -85.05112878,
                2251799813685248.0,
                "0.00000268220901489",
                "-85.05112751263942528",
                "h0bh0hbj200",
            ),
            (
                13.361389,
                38.115556,
                3479099956230698.0,
                "13.36138933897018433",
                "38.11555639549629859",
                "sqc8b49rny0",
            ),
            (
                15.087269,
                37.502669,
                3479447370796909.0,
                "15.08726745843887329",
                "37.50266842333162032",
                "sqdtr74hyu0",
            ),
        ] {
            assert_eq!(geoadd_score(lon, lat), Some(score), "{lon},{lat}");
            let (x, y) = decode_score(score);
            assert_eq!(
                (format_coord(x).as_str(), format_coord(y).as_str()),
                (plon, plat)
            );
            assert_eq!(geohash_string(score), hash);
        }
    }

    #[test]
    fn odd_scores_decode_as_redis_converts_them() {
        // ZADD of scores that are not geohashes, then GEOPOS / GEOHASH.
        for (score, plon, plat, hash) in [
            (-1.0, "180", "85.0511287799999991", "bp05b5048p0"),
            (1e19, "180", "85.0511287799999991", "bp05b5048p0"),
            (
                f64::INFINITY,
                "-179.99999731779098511",
                "-85.05112751263942528",
                "00bh0hbj200",
            ),
            (
                5.5,
                "-179.99999731779098511",
                "-85.05111990847595393",
                "00bh0hbj240",
            ),
            (-12345.75, "180", "85.0511287799999991", "bp05b5048p0"),
        ] {
            let (x, y) = decode_score(score);
            assert_eq!(
                (format_coord(x).as_str(), format_coord(y).as_str()),
                (plon, plat),
                "{score}"
            );
            assert_eq!(geohash_string(score), hash, "{score}");
        }
    }

    #[test]
    fn distances_equal_redis() {
        // GEODIST Sicily Palermo Catania (Redis's documentation example).
        let z = zset_of(&[
            (13.361389, 38.115556, "Palermo"),
            (15.087269, 37.502669, "Catania"),
        ]);
        for (unit, want) in [
            (Unit::M, "166274.1516"),
            (Unit::Km, "166.2742"),
            (Unit::Mi, "103.3182"),
            (Unit::Ft, "545518.8700"),
        ] {
            let d = geodist(&z, b"Palermo", b"Catania", unit);
            assert_eq!(d.map(format_distance).as_deref(), Some(want), "{unit:?}");
        }
        assert_eq!(geodist(&z, b"Palermo", b"nope", Unit::M), None);
    }

    #[test]
    fn distance_texts_round_half_even() {
        for (d, want) in [
            (0.0, "0.0000"),
            (-0.0, "0.0000"),
            (0.00004, "0.0000"),
            (0.00005, "0.0000"), // scales to exactly 0.5: half to even
            (0.00015, "0.0001"), // 1.4999999999999998 after scaling
            (1.5, "1.5000"),
            (0.0012, "0.0012"),
            (123456.78915, "123456.7892"),
            (-2.5, "-2.5000"),
            (-0.00001, "0.0000"),
        ] {
            assert_eq!(format_distance(d), want, "{d}");
        }
    }

    #[test]
    fn coord_texts() {
        for (v, want) in [
            (0.0, "0"),
            (-0.0, "0"),
            (-1e-20, "0"),
            (180.0, "180"),
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(format_coord(v), want, "{v}");
        }
    }

    #[test]
    fn doubles_parse_as_strtod() {
        for (s, want) in [
            ("1", Some(1.0)),
            ("-2.5", Some(-2.5)),
            ("+.5", Some(0.5)),
            ("5.", Some(5.0)),
            ("1e3", Some(1000.0)),
            ("1E+3", Some(1000.0)),
            ("inf", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("0x10", Some(16.0)),
            ("0x1.8p1", Some(3.0)),
            ("-0X.8", Some(-0.5)),
            ("0x1p-1074", Some(f64::from_bits(1))),
            ("0x1p-1075", None),
            ("0x1.8p-1075", Some(f64::from_bits(1))),
            ("0x1p1024", None),
            ("0x1.fffffffffffff8p1023", None),
            ("0x1.fffffffffffff7p1023", Some(f64::MAX)),
            ("0x", None),
            ("0x1p", None),
            ("1e-310", Some(1e-310)),
            ("1e-400", None),
            ("0e-400", Some(0.0)),
            ("1e400", None),
            ("nan", None),
            ("", None),
            (" 1", None),
            ("1 ", None),
            (".", None),
            ("e5", None),
            ("1e", None),
            ("1x", None),
            ("infinit", None),
        ] {
            assert_eq!(parse_double(s.as_bytes()), want, "{s:?}");
        }
    }

    #[test]
    fn errors_carry_redis_texts() {
        for (e, want) in [
            (
                check_lon_lat(180.1, 0.0).err(),
                "ERR invalid longitude,latitude pair 180.100000,0.000000",
            ),
            (
                check_lon_lat(-0.0, 200.0).err(),
                "ERR invalid longitude,latitude pair -0.000000,200.000000",
            ),
            (
                check_lon_lat(f64::INFINITY, 1.0).err(),
                "ERR invalid longitude,latitude pair inf,1.000000",
            ),
            (
                Unit::parse(b"yd").err(),
                "ERR unsupported unit provided. please use M, KM, FT, MI",
            ),
        ] {
            assert_eq!(e.map(|e| e.to_string()).as_deref(), Some(want));
        }
        assert_eq!(Unit::parse(b"KM\0junk"), Ok(Unit::Km));
    }

    #[test]
    fn geoadd_parses_options_and_points() {
        let ok = parse_geoadd(&args("GEOADD k ch NX 13.361389 38.115556 Palermo"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(ok.nx && ok.ch && !ok.xx);
        assert_eq!(ok.items.len(), 1);
        for (line, want) in [
            ("GEOADD k nx xx 1 2 m", GeoError::Syntax),
            ("GEOADD k 1 2 m 3", GeoError::Syntax),
            ("GEOADD k nx xx ch", GeoError::Syntax),
            (
                "GEOADD k 1 2 m 200 2 n",
                GeoError::InvalidLonLat {
                    lon: 200.0,
                    lat: 2.0,
                },
            ),
            ("GEOADD k GT 1 2", GeoError::NotFloat),
            ("GEOADD k 1 2", GeoError::WrongArity("geoadd".into())),
        ] {
            assert_eq!(parse_geoadd(&args(line)), Err(want), "{line}");
        }
        let mut z = ZSet::default();
        let add = |line: &str| parse_geoadd(&args(line)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(apply_geoadd(&mut z, &add("GEOADD k 1 2 a 3 4 b")), 2);
        assert_eq!(
            apply_geoadd(&mut z, &add("GEOADD k CH 1 2 a 5 6 b 7 8 c")),
            2
        );
        assert_eq!(apply_geoadd(&mut z, &add("GEOADD k NX 9 9 a 7 8 d")), 1);
        assert_eq!(apply_geoadd(&mut z, &add("GEOADD k XX CH 9 9 a 7 8 e")), 1);
        assert_eq!(z.len(), 4);
    }

    #[test]
    fn step_estimate() {
        for (r, lat, want) in [
            (0.0, 0.0, 26),
            (1.0, 0.0, 24),
            (1000.0, 0.0, 14),
            (1000.0, 70.0, 13),
            (1000.0, -81.0, 12),
            (5_000_000.0, 0.0, 2),
            (10_000_000.0, 0.0, 1),
            (f64::INFINITY, 0.0, 1),
        ] {
            assert_eq!(estimate_steps_by_radius(r, lat), want, "{r} {lat}");
        }
    }

    #[test]
    fn neighbors_wrap_around() {
        let h = HashBits { bits: 0, step: 2 };
        let n = neighbors(h);
        // Longitude index 0 → west wraps to 3 (odd bits), latitude 0 →
        // south wraps to 3 (even bits).
        assert_eq!(n.west.bits, 0b1010);
        assert_eq!(n.south.bits, 0b0101);
        assert_eq!(n.east.bits, 0b0010);
        assert_eq!(n.north.bits, 0b0001);
        assert_eq!(n.south_west.bits, 0b1111);
    }

    #[test]
    fn search_finds_sicily_as_in_redis_docs() {
        let z = zset_of(&[
            (13.361389, 38.115556, "Palermo"),
            (15.087269, 37.502669, "Catania"),
            (12.758489, 38.788135, "edge1"),
            (17.241510, 38.788135, "edge2"),
        ]);
        let plan = parse_search(
            SearchCommand::GeoRadius,
            &args("GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD ASC"),
            Some(&z),
        );
        let Ok(SearchPlan::Run(req)) = plan else {
            panic!("{plan:?}")
        };
        let got: Vec<(String, String, (String, String))> = search(&z, &req)
            .iter()
            .map(|p| {
                (
                    String::from_utf8_lossy(&p.member).into_owned(),
                    p.dist_text(),
                    p.coord_texts(),
                )
            })
            .collect();
        let want = [
            (
                "Catania",
                "56.4413",
                ("15.08726745843887329", "37.50266842333162032"),
            ),
            (
                "Palermo",
                "190.4424",
                ("13.36138933897018433", "38.11555639549629859"),
            ),
        ];
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert_eq!(
                (
                    g.0.as_str(),
                    g.1.as_str(),
                    (g.2 .0.as_str(), g.2 .1.as_str())
                ),
                w
            );
        }
        // GEOSEARCH ... BYBOX 400 400 km ASC WITHDIST (Redis's docs).
        let plan = parse_search(
            SearchCommand::GeoSearch,
            &args("GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHDIST"),
            Some(&z),
        );
        let Ok(SearchPlan::Run(req)) = plan else {
            panic!("{plan:?}")
        };
        let got: Vec<(Vec<u8>, String)> = search(&z, &req)
            .into_iter()
            .map(|p| (p.member.clone(), p.dist_text()))
            .collect();
        assert_eq!(
            got,
            vec![
                (b"Catania".to_vec(), "56.4413".into()),
                (b"Palermo".to_vec(), "190.4424".into()),
                (b"edge2".to_vec(), "279.7403".into()),
                (b"edge1".to_vec(), "279.7405".into()),
            ]
        );
    }

    #[test]
    fn search_errors_in_redis_order() {
        let z = zset_of(&[(1.0, 1.0, "a")]);
        let e = |cmd: SearchCommand, line: &str, z: Option<&ZSet>| match parse_search(
            cmd,
            &args(line),
            z,
        ) {
            Err(e) => e.to_string(),
            Ok(p) => format!("{p:?}"),
        };
        use SearchCommand::*;
        for (cmd, line, want) in [
            (GeoRadius, "GEORADIUS k 200 0 1 km", "ERR invalid longitude,latitude pair 200.000000,0.000000"),
            (GeoRadius, "GEORADIUS k x 0 1 km", "ERR value is not a valid float"),
            (GeoRadius, "GEORADIUS k 0 0 x km", "ERR need numeric radius"),
            (GeoRadius, "GEORADIUS k 0 0 -1 km", "ERR radius cannot be negative"),
            (GeoRadius, "GEORADIUS k 0 0 1 yd", "ERR unsupported unit provided. please use M, KM, FT, MI"),
            (GeoRadius, "GEORADIUS k 0 0 1 km COUNT", "ERR syntax error"),
            (GeoRadius, "GEORADIUS k 0 0 1 km COUNT 0", "ERR COUNT must be > 0"),
            (GeoRadius, "GEORADIUS k 0 0 1 km COUNT x", "ERR value is not an integer or out of range"),
            (GeoRadius, "GEORADIUS k 0 0 1 km ANY", "ERR the ANY argument requires COUNT argument"),
            (GeoRadius, "GEORADIUS k 0 0 1 km STORE d WITHDIST", "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
            (GeoRadiusRo, "GEORADIUS_RO k 0 0 1 km STORE d", "ERR syntax error"),
            (GeoRadiusByMember, "GEORADIUSBYMEMBER k zz 1 km", "ERR could not decode requested zset member"),
            (GeoSearch, "GEOSEARCH k FROMLONLAT 0 0 COUNT 1", "ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH"),
            (GeoSearch, "geosearch k BYRADIUS 1 m COUNT 1", "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch"),
            (GeoSearch, "GEOSEARCH k FROMMEMBER a FROMLONLAT 0 0 BYRADIUS 1 m", "ERR syntax error"),
            (GeoSearch, "GEOSEARCH k FROMMEMBER zz BYRADIUS 1 m foo", "ERR could not decode requested zset member"),
            (GeoSearch, "GEOSEARCH k FROMMEMBER a BYBOX 1 x m", "ERR need numeric height"),
            (GeoSearch, "GEOSEARCH k FROMMEMBER a BYBOX 1 -1 m", "ERR height or width cannot be negative"),
            (GeoSearch, "GEOSEARCH k FROMMEMBER a BYRADIUS 1 m STORE x", "ERR syntax error"),
            (GeoSearchStore, "GEOSEARCHSTORE d k FROMMEMBER a BYRADIUS 1 m WITHDIST", "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
        ] {
            assert_eq!(e(cmd, line, Some(&z)), want, "{line}");
        }
        // A missing key skips the member (and GEORADIUSBYMEMBER's radius).
        assert_eq!(
            parse_search(
                GeoRadiusByMember,
                &args("GEORADIUSBYMEMBER k zz x km"),
                None
            ),
            Ok(SearchPlan::KeyMissing { store: None })
        );
        assert_eq!(
            parse_search(
                GeoSearchStore,
                &args("GEOSEARCHSTORE d k FROMMEMBER zz BYRADIUS 1 m STOREDIST"),
                None
            ),
            Ok(SearchPlan::KeyMissing {
                store: Some(StoreTarget {
                    key: b"d".to_vec(),
                    dist: true
                })
            })
        );
    }

    #[test]
    fn pqsort_sorts_the_prefix() {
        let mut rng = crate::value::SplitMix::new(7);
        for n in [0usize, 1, 5, 7, 8, 30, 41, 100, 500] {
            for keep in [1usize, 2, 10, 50] {
                let mut pts: Vec<GeoPoint> = (0..n)
                    .map(|i| GeoPoint {
                        member: i.to_string().into_bytes(),
                        score: 0.0,
                        lon: 0.0,
                        lat: 0.0,
                        dist: rng.below(20) as f64,
                    })
                    .collect();
                let mut want: Vec<f64> = pts.iter().map(|p| p.dist).collect();
                want.sort_by(f64::total_cmp);
                sort_points(&mut pts, Sort::Asc, keep.min(n));
                let k = keep.min(n);
                let got: Vec<f64> = pts[..k].iter().map(|p| p.dist).collect();
                assert_eq!(got, want[..k].to_vec(), "n={n} keep={keep}");
                assert_eq!(pts.len(), n);
            }
        }
    }
}
