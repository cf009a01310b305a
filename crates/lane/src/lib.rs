//! xlane-lane
