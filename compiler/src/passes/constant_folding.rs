//! Constant folding: an instruction whose operands are all known at compile time is
//! evaluated with the reference interpreter and replaced by a constant.
//!
//! Operands count as known when they are constants, iotas, or broadcasts of known values.
//! Iotas and broadcasts are not folded themselves (they are cheap to compute and would make
//! large constants), but what they feed is: JAX's `iota_2x32_shape` computations (u64 iotas
//! shifted and converted to u32) fold into u32 constants this way. Results above
//! [`ConstantFolding::max_elements`] elements stay unfolded, and so do instructions with an
//! operand above it (folding would evaluate the operand).

use super::util::{add_instr, pin_roots, remove_if_dead};
use super::{Pass, PassError};
use crate::interpreter::evaluate_computation;
use crate::ir::{Computation, ComputationId, InstrId, Instruction, Module, Op};
use hashbrown::HashMap;

pub struct ConstantFolding {
    /// Largest result (in elements) worth turning into a constant.
    pub max_elements: i64,
}

impl Default for ConstantFolding {
    fn default() -> ConstantFolding {
        ConstantFolding {
            max_elements: 1 << 16,
        }
    }
}

impl Pass for ConstantFolding {
    fn name(&self) -> &'static str {
        "constant-folding"
    }

    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        pin_roots(m);
        let mut changed = false;
        for cid in m.computation_ids().collect::<Vec<_>>() {
            for id in m.computation(cid).post_order() {
                let c = m.computation(cid);
                if !c.contains(id) || !self.foldable(c, id) {
                    continue;
                }
                let Some(value) = evaluate_in_isolation(m, cid, id) else {
                    continue;
                };
                let instr = m.computation(cid).get(id);
                let (shape, metadata) = (instr.shape.clone(), instr.metadata.clone());
                if value.shape() != shape {
                    continue;
                }
                let k = add_instr(m, cid, Op::Constant(value), shape, &[], metadata);
                let c = m.computation_mut(cid);
                c.replace_all_uses(id, k);
                remove_if_dead(c, id);
                changed = true;
            }
        }
        Ok(changed)
    }
}

/// Whether `id`'s value is known at compile time without folding it: a constant, an iota, or
/// a broadcast of a known value — of at most `max_elements` elements, since folding a user
/// evaluates it (a scalar reduce of a huge broadcast would allocate the broadcast).
fn is_known(c: &Computation, id: InstrId, max_elements: i64) -> bool {
    let instr = c.get(id);
    let small = instr
        .shape
        .as_array()
        .is_some_and(|a| a.is_static() && within(a, max_elements));
    small
        && match instr.op {
            Op::Constant(_) | Op::Iota { .. } => true,
            Op::Broadcast { .. } => is_known(c, instr.operand(0), max_elements),
            _ => false,
        }
}

/// Whether `a` has at most `max` elements (an element count that overflows has more).
fn within(a: &crate::ir::ArrayShape, max: i64) -> bool {
    a.dims
        .iter()
        .try_fold(1i64, |n, &d| n.checked_mul(d.max(0)))
        .is_some_and(|n| n <= max)
}

impl ConstantFolding {
    fn foldable(&self, c: &Computation, id: InstrId) -> bool {
        let instr = c.get(id);
        let op_ok = !instr.op.has_side_effect()
            && !instr.op.is_collective()
            && !matches!(
                instr.op,
                Op::Parameter(_)
                    | Op::Constant(_)
                    | Op::Iota { .. }
                    | Op::Broadcast { .. }
                    | Op::While { .. }
                    | Op::Call { .. }
                    | Op::Conditional { .. }
                    | Op::Fusion { .. }
                    | Op::CustomCall { .. }
                    | Op::ReplicaId
                    | Op::PartitionId
                    | Op::Infeed { .. }
                    | Op::Outfeed { .. }
                    | Op::AfterAll
                    | Op::Tuple
                    | Op::GetTupleElement { .. }
            );
        op_ok
            && instr
                .shape
                .as_array()
                .is_some_and(|a| a.is_static() && within(a, self.max_elements))
            && !instr.operands().is_empty()
            && instr
                .operands()
                .iter()
                .all(|&o| is_known(c, o, self.max_elements))
    }
}

/// Evaluates instruction `id` of `comp` from its known operands, in a scratch computation
/// appended to the module (so that called reducers resolve) and removed again.
fn evaluate_in_isolation(
    m: &mut Module,
    comp: ComputationId,
    id: InstrId,
) -> Option<crate::ir::Literal> {
    let c = m.computation(comp);
    let mut scratch = Computation::new("constant_folding.scratch");
    let mut map: HashMap<InstrId, InstrId> = HashMap::new();
    let mut stack = vec![(id, false)];
    // Copy the known operand trees, operands before users.
    while let Some((x, expanded)) = stack.pop() {
        if map.contains_key(&x) {
            continue;
        }
        if !expanded {
            stack.push((x, true));
            for &o in c.get(x).operands() {
                stack.push((o, false));
            }
            continue;
        }
        let orig = c.get(x);
        let operands: Vec<InstrId> = orig.operands().iter().map(|o| map[o]).collect();
        let copy = Instruction::new(orig.name.clone(), orig.op.clone(), orig.shape.clone());
        map.insert(x, scratch.add(copy, &operands));
    }
    scratch.set_root(map[&id]);
    let scratch_id = m.add_computation(scratch);
    let result = evaluate_computation(m, scratch_id, &[]);
    m.computations.pop();
    debug_assert_eq!(m.computations.len(), scratch_id.0 as usize);
    result.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo_text::parse_module;

    /// Folding a small result must not evaluate a huge known operand (it used to allocate
    /// the 4 TB broadcast and abort), nor fold a huge result.
    #[test]
    fn huge_known_values_are_not_folded() {
        let text = "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
             ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  c = f32[] constant(1)\n  \
             b = f32[1000000,1000000] broadcast(c), dimensions={}\n  \
             z = f32[] constant(0)\n  \
             r = f32[] reduce(b, z), dimensions={0,1}, to_apply=add\n  \
             n = f32[1000000,1000000] negate(b)\n  \
             ROOT t = (f32[], f32[1000000,1000000]) tuple(r, n)\n}\n";
        let mut m = parse_module(text, None).unwrap();
        assert!(!ConstantFolding::default().run(&mut m).unwrap());
        // Small operands still fold.
        let small = "HloModule m\n\nENTRY e {\n  c = f32[] constant(1)\n  \
             b = f32[4] broadcast(c), dimensions={}\n  ROOT n = f32[4] negate(b)\n}\n";
        let mut m = parse_module(small, None).unwrap();
        assert!(ConstantFolding::default().run(&mut m).unwrap());
        assert!(matches!(
            m.entry().get(m.entry().root()).op,
            Op::Constant(_)
        ));
    }
}
