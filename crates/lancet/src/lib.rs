//! xlane-lancet (being written)
