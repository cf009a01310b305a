//! A search's geometry: the shape and its test, the step estimate and the
//! areas scanned, collecting the points and sorting them as Redis does.

use super::distance::{
    deg_rad, distance, format_coord, format_distance, lat_distance, rad_deg, Unit,
};
use super::hash::{
    decode, decode_score, encode, neighbors, score_range, HashArea, HashBits,
    EARTH_RADIUS_IN_METERS, LAT_RANGE, LONG_RANGE, MERCATOR_MAX,
};
use super::number::c_double_to_i64;
use crate::value::{Score, ZSet};
use std::ops::Bound;

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
    pub(super) fn conversion(&self) -> f64 {
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
    /// search's unit from [`search`](super::search()) (`WITHDIST`, `STOREDIST`).
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
    /// [`search`](super::search()) turns into [`Sort::Asc`] as Redis does).
    None,
    /// `ASC`: nearest first.
    Asc,
    /// `DESC`: farthest first.
    Desc,
}

/// Redis's comparison of two points by distance (`sort_gp_asc`).
pub(super) fn cmp_dist(a: &GeoPoint, b: &GeoPoint) -> i32 {
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
pub(super) fn partial_quicksort<T>(
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
