//! HTTP requests to a daemon's `/metrics` endpoint: the request-line
//! parser refuses with a typed error or names what was asked, and never
//! panics; a request it takes for `/metrics` starts with `GET /metrics`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_metrics::{parse_request, Request};

fuzz_target!(|data: &[u8]| {
    if let Ok(Request::Metrics) = parse_request(data) {
        assert!(data.starts_with(b"GET /metrics"));
    }
});
