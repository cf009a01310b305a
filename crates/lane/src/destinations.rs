//! The destinations one frame goes to, when a sender replicates its frames
//! to several receivers itself (the same bytes to each, back to back, in
//! one slot): a set of indices into the sender's destination list.

/// Most destinations a [`Destinations`] set tells apart.
pub const MAX_RECEIVERS: usize = 64;

/// A set of destination indices (a bitmap of up to [`MAX_RECEIVERS`]), or
/// [`Destinations::ALL`]: every destination, however many there are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Destinations(u64);

impl Destinations {
    /// Every destination (also those past [`MAX_RECEIVERS`]).
    pub const ALL: Destinations = Destinations(u64::MAX);
    /// No destination.
    pub const NONE: Destinations = Destinations(0);

    /// Adds index `i` (below [`MAX_RECEIVERS`]; a larger one is ignored).
    pub fn insert(&mut self, i: usize) {
        if i < MAX_RECEIVERS {
            self.0 |= 1 << i;
        }
    }

    /// `true` if index `i` is in the set (every index for [`Self::ALL`]).
    pub fn contains(&self, i: usize) -> bool {
        *self == Self::ALL || (i < MAX_RECEIVERS && self.0 & (1 << i) != 0)
    }

    /// Number of indices below [`MAX_RECEIVERS`] in the set.
    pub fn len(&self) -> usize {
        self.0.count_ones() as usize
    }

    /// `true` if there is no destination.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The indices below [`MAX_RECEIVERS`], ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> {
        let mut m = self.0;
        core::iter::from_fn(move || {
            if m == 0 {
                return None;
            }
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(i)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_what_was_inserted_and_all_holds_everything() {
        let mut d = Destinations::NONE;
        assert!(d.is_empty());
        for i in [4, 0, 63, 64, 200] {
            d.insert(i);
        }
        assert_eq!(d.iter().collect::<Vec<_>>(), [0, 4, 63]);
        assert_eq!(d.len(), 3);
        assert!(d.contains(63) && !d.contains(1) && !d.contains(64));
        assert!(Destinations::ALL.contains(0) && Destinations::ALL.contains(1000));
        assert_eq!(Destinations::default(), Destinations::NONE);
    }
}
