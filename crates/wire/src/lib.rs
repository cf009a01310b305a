//! xlane-wire
