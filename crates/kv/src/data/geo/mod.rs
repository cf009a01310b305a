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
//!   then [`apply_geoadd`] (ZADD's `NX`/`XX`/`CH` semantics on a [`ZSet`](crate::value::ZSet)).
//!   The score of one point is [`geoadd_score`] ([`encode`] at 26 steps).
//! * `GEOPOS`: [`geopos`] / [`geopos_reply`] ([`decode_score`] and
//!   [`format_coord`]).
//! * `GEOHASH`: [`geohash`] / [`geohash_reply`] ([`geohash_string`]).
//! * `GEODIST`: [`parse_geodist`], then [`geodist`] / [`geodist_reply`]
//!   ([`distance`], [`Unit`], [`format_distance`]).
//! * `GEORADIUS`, `GEORADIUS_RO`, `GEORADIUSBYMEMBER`,
//!   `GEORADIUSBYMEMBER_RO`, `GEOSEARCH`, `GEOSEARCHSTORE`:
//!   [`parse_search`] (every option, with Redis's errors in Redis's order)
//!   gives a [`SearchRequest`]; [`search`] runs it over the [`ZSet`](crate::value::ZSet) and
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
//! [`Reply::Double`](crate::resp::Reply::Double)), distances with 4 decimals rounded as `llrint`
//! ([`format_distance`], always a bulk string), `WITHHASH` as the integer
//! score.
//!
//! The files, from the bottom up: `error`, `number` (parsing as Redis
//! does), `hash` (geohash bits and neighbors), `distance` (distances,
//! units, texts), `point` (the point commands), `shape` (a search's
//! geometry, collecting and sorting), `search` (the search commands).

mod distance;
mod error;
mod hash;
mod number;
mod point;
mod search;
mod shape;

pub use self::distance::*;
pub use self::error::*;
pub use self::hash::*;
pub use self::number::*;
pub use self::point::*;
pub use self::search::*;
pub use self::shape::*;

#[cfg(test)]
mod tests;
