//! The link index: per link, the tunnels whose trees cross it, unicast
//! and multicast apart, with the unicast ones counted per sub-lane (what
//! scoring a candidate path reads, see [`super::tree`]).

use super::{TunnelId, MAX_SUBLANES};

/// The tunnels on one link (none by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct OnLink {
    /// Unicast tunnels, by increasing id: a sorted vector, which a
    /// scoring pass reads as one slice (each tunnel holds a slot of the
    /// link's express queue of its sub-lane, so there are at most that
    /// many per sub-lane).
    unicast: Vec<TunnelId>,
    /// Multicast tunnels, by increasing id.
    multicast: Vec<TunnelId>,
    /// Per sub-lane: how many of `unicast` are on it (inline, as a
    /// link's loads are).
    unicast_lanes: [u32; MAX_SUBLANES],
}

impl OnLink {
    /// Add tunnel `id` (multicast or not, on sub-lane `lane`); false if
    /// it was there.
    pub(super) fn insert(&mut self, id: TunnelId, multicast: bool, lane: u8) -> bool {
        let set = if multicast {
            &mut self.multicast
        } else {
            &mut self.unicast
        };
        match set.binary_search(&id) {
            Ok(_) => false,
            Err(at) => {
                set.insert(at, id);
                if !multicast {
                    self.unicast_lanes[lane as usize] += 1;
                }
                true
            }
        }
    }

    /// Take tunnel `id` away (as [`OnLink::insert`] added it).
    pub(super) fn remove(&mut self, id: TunnelId, multicast: bool, lane: u8) {
        let set = if multicast {
            &mut self.multicast
        } else {
            &mut self.unicast
        };
        if let Ok(at) = set.binary_search(&id) {
            set.remove(at);
            if !multicast {
                self.unicast_lanes[lane as usize] -= 1;
            }
        }
    }

    /// Every tunnel on the link, unicast then multicast.
    pub(super) fn all(&self) -> impl Iterator<Item = TunnelId> + '_ {
        self.unicast.iter().chain(&self.multicast).copied()
    }

    /// The unicast tunnels.
    pub(super) fn unicast(&self) -> &[TunnelId] {
        &self.unicast
    }

    /// The multicast tunnels.
    pub(super) fn multicast(&self) -> &[TunnelId] {
        &self.multicast
    }

    /// Per sub-lane, the unicast tunnels on it.
    pub(super) fn unicast_lanes(&self) -> &[u32] {
        &self.unicast_lanes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts follow inserts and removals, a second insert counts once,
    /// and the two kinds stay apart.
    #[test]
    fn counts_follow_the_tunnels() {
        let mut o = OnLink::default();
        assert!(o.insert(TunnelId(1), false, 1));
        assert!(!o.insert(TunnelId(1), false, 1));
        assert!(o.insert(TunnelId(2), false, 0));
        assert!(o.insert(TunnelId(3), true, 0));
        assert_eq!(o.unicast_lanes(), &[1, 1, 0, 0]);
        assert_eq!(o.all().collect::<Vec<_>>(), [1, 2, 3].map(TunnelId));
        o.remove(TunnelId(1), false, 1);
        o.remove(TunnelId(1), false, 1);
        o.remove(TunnelId(3), true, 0);
        assert_eq!(o.unicast_lanes(), &[1, 0, 0, 0]);
        assert_eq!(o.multicast().len(), 0);
        assert_eq!(o.unicast().len(), 1);
    }
}
