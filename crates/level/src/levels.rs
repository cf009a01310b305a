//! The level table of `xlane run`.
//!
//! QJump (Grosvenor et al., NSDI 2015) binds each switch priority to a
//! host rate limit: the higher the level, the fewer packets per network
//! epoch `2nP/R` a host may send on it, and the tighter the latency bound.
//! xlane's switches (and the testbed's) keep two express classes above best
//! effort, matched on the DSCP, so `xlane run` offers three levels:
//!
//! | level | DSCP | TOS byte | `SO_PRIORITY` | throughput factor `f` | bound |
//! |---|---|---|---|---|---|
//! | 2 | 46 (EF)  | 0xb8 | 6 | 1 | one network epoch, guaranteed |
//! | 1 | 40 (CS5) | 0xa0 | 5 | n (every host's share of the link) | one epoch, statistical |
//! | 0 | 0        | 0x00 | 0 | none (best effort, not paced) | none |

/// One level: how its packets are marked and how much each host may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelSpec {
    /// The level number given to `--level`.
    pub level: u8,
    /// DSCP of the level's packets.
    pub dscp: u8,
    /// `SO_PRIORITY` of the level's sockets (≤ 6: no capability needed).
    pub priority: u8,
    /// QJump throughput factor: `Some(0)` means `n` (the number of hosts),
    /// `None` means not rate limited (best effort).
    pub factor: Option<u32>,
}

impl LevelSpec {
    /// The IP TOS / IPv6 traffic-class byte (DSCP in the upper six bits).
    pub fn tos(&self) -> u8 {
        self.dscp << 2
    }

    /// The throughput factor for `hosts` hosts (`None`: not limited).
    pub fn factor_for(&self, hosts: u32) -> Option<u32> {
        self.factor.map(|f| {
            if f == 0 {
                hosts.max(1)
            } else {
                f.min(hosts.max(1))
            }
        })
    }

    /// The level with number `n`, if there is one.
    pub fn get(n: u8) -> Option<LevelSpec> {
        LEVELS.iter().copied().find(|l| l.level == n)
    }
}

/// Every level, lowest first.
pub const LEVELS: [LevelSpec; 3] = [
    LevelSpec {
        level: 0,
        dscp: 0,
        priority: 0,
        factor: None,
    },
    LevelSpec {
        level: 1,
        dscp: 40,
        priority: 5,
        factor: Some(0),
    },
    LevelSpec {
        level: 2,
        dscp: 46,
        priority: 6,
        factor: Some(1),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let two = LevelSpec::get(2).unwrap();
        assert_eq!(two.tos(), 0xb8);
        assert_eq!(two.factor_for(3), Some(1));
        let one = LevelSpec::get(1).unwrap();
        assert_eq!(one.tos(), 0xa0);
        assert_eq!(one.factor_for(3), Some(3));
        assert_eq!(LevelSpec::get(0).unwrap().factor_for(3), None);
        assert!(LevelSpec::get(3).is_none());
    }
}
