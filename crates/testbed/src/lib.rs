//! xlane-testbed
