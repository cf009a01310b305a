//! Geohash bits: the coordinate limits, interleaving, encoding and
//! decoding at any step, score ranges, the base-32 text and a cell's
//! neighbors.

use super::error::GeoError;
use super::number::{c_double_to_i64, c_double_to_u64, parse_double};

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
pub(super) const D_R: f64 = std::f64::consts::PI / 180.0;
/// The alphabet of the standard geohash text (`GEOHASH`).
pub(super) const GEOALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
pub(super) const EVEN_BITS: u64 = 0x5555_5555_5555_5555;
pub(super) const ODD_BITS: u64 = 0xaaaa_aaaa_aaaa_aaaa;
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
    pub(super) fn is_zero(self) -> bool {
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
pub(super) fn interleave(lat: u32, lon: u32) -> u64 {
    let mut out = 0u64;
    for i in 0..32 {
        out |= u64::from((lat >> i) & 1) << (2 * i);
        out |= u64::from((lon >> i) & 1) << (2 * i + 1);
    }
    out
}

/// The inverse of [`interleave`]: (latitude bits, longitude bits).
pub(super) fn deinterleave(v: u64) -> (u32, u32) {
    let (mut lat, mut lon) = (0u32, 0u32);
    for i in 0..32 {
        lat |= (((v >> (2 * i)) & 1) as u32) << i;
        lon |= (((v >> (2 * i + 1)) & 1) as u32) << i;
    }
    (lat, lon)
}

/// C's `(uint32_t)d` for `0 <= d <= 2^32` as x86-64 computes it (through a
/// 64-bit conversion, so `2^32` wraps to 0).
pub(super) fn c_double_to_u32(d: f64) -> u32 {
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

/// One cell east (`d > 0`) or west (`d < 0`), wrapping around.
pub(super) fn move_x(hash: &mut HashBits, d: i8) {
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
pub(super) fn move_y(hash: &mut HashBits, d: i8) {
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
