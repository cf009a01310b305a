//! Distances on the sphere, units, and the coordinate and distance
//! texts as Redis prints them.

use super::error::GeoError;
use super::hash::{D_R, EARTH_RADIUS_IN_METERS};
use super::number::{keyword, TWO_POW_63};

pub(super) fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

pub(super) fn rad_deg(ang: f64) -> f64 {
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
