//! The data structures behind Redis's value encodings, free of the store,
//! the command table and the network: each is a pure, deterministic
//! function of its inputs (time, when it matters, is passed in), so every
//! member computes the same result from the same op.
//!
//! * [`bits`]: bitmaps and bit fields over a string (`SETBIT`, `BITCOUNT`,
//!   `BITPOS`, `BITOP`, `BITFIELD`), and the string ranges and `LCS`.
//! * [`hll`]: HyperLogLog in Redis's own sparse and dense encodings, so a
//!   sketch's bytes, counts and `DUMP` equal Redis's.
//! * [`geo`]: geohashes, distances and the radius and box searches of the
//!   `GEO*` commands, as Redis computes them.
//! * [`stream`]: a stream: entries by ID, trimming, consumer groups, their
//!   pending entries and consumers.
//! * [`rdb`]: the `DUMP`/`RESTORE` payload: Redis's RDB object encodings,
//!   version and CRC-64 trailer.

pub mod bits;
pub mod geo;
pub mod hll;
pub mod rdb;
pub mod stream;
