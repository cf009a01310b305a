//! xlane-bench
