//! Shared pieces of the end-to-end tests.
#![allow(dead_code)] // each test binary uses its own part
pub mod cluster;
pub mod differential;
pub mod real_redis;
