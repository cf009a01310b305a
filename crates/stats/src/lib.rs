//! xlane-stats (being written)
