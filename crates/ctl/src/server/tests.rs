use super::*;
use crate::fabric::{FabricError, SwitchMeter};
use crate::proto::TunnelId;

/// Fails every operation on an even tunnel, records the others.
#[derive(Default)]
struct HalfBroken(Vec<TunnelId>);

impl Fabric for HalfBroken {
    fn apply(&mut self, op: &FabricOp) -> Result<(), FabricError> {
        if op.tunnel().0 % 2 == 0 {
            return Err(FabricError::Failed("refused".into()));
        }
        self.0.push(op.tunnel());
        Ok(())
    }
    fn meters(&mut self) -> Result<Vec<SwitchMeter>, FabricError> {
        Ok(Vec::new())
    }
}

#[test]
fn a_failed_fabric_operation_is_counted_and_the_rest_applied() {
    let ops: Vec<_> = (1..=5)
        .map(|t| FabricOp::Demote {
            tunnel: TunnelId(t),
        })
        .collect();
    let counters = Counters::default();
    let mut fabric = HalfBroken::default();
    counters.apply_fabric(&mut fabric, &ops, FabricPass::Changes);
    counters.apply_fabric(&mut fabric, &ops[..2], FabricPass::Resync);
    let applied: Vec<u64> = fabric.0.iter().map(|t| t.0).collect();
    assert_eq!(applied, vec![1, 3, 5, 1]);
    assert_eq!(counters.fabric_errors.load(Ordering::Relaxed), 3);
}
