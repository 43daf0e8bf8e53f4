//! Recognizing the bias add that follows a convolution, so that the convolution's routine adds
//! the bias in its own stores (`conv_select::ConvRoutine::take_bias`) and the add's pass over
//! the output, a full write and read of it, disappears.
//!
//! The form is a fusion computing `add(p, broadcast(q, dimensions={feature}))` (either operand
//! order) on f32, where `p` has the fusion's shape, `q` is a vector over the convolution's
//! output feature dimension, and nothing else is in the fusion. The routines compute
//! `sum + bias[o]` with the sum rounded first, the bits of the separate add (when both are
//! NaN, which payload survives may differ with the operand order). Anything else (a
//! ReLU after the add, a bias over another dimension, a scaled bias) is not matched and runs
//! as the generated kernel it is.

use tessel_compiler::ir::{BinaryOp, Computation, ElementType, InstrId, Module, Op};

/// A bias-add fusion: which of its parameters is the convolution's result and which the bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BiasAdd {
    pub value: u32,
    pub bias: u32,
}

/// The match for fusion computation `comp` whose result's dimension `feature` is the
/// convolution's output feature dimension, if it is the form above.
pub(crate) fn match_bias_add(comp: &Computation, feature: i64) -> Option<BiasAdd> {
    let m = bias_add_at(comp, comp.root(), feature)?;
    // Parameters, the broadcast and the add: nothing else may hide in the fusion.
    (comp.instructions().count() == 4).then_some(m)
}

/// The bias-add fusion that alone reads convolution `conv` of `comp` (its only user, reading
/// it once, as the add's value), with its match: the add a convolution routine can compute in
/// its stores (`program/conv_bias.rs`) and what a folded pool may read (`pool_fold.rs`).
pub(crate) fn lone_bias_add(
    m: &Module,
    comp: &Computation,
    conv: InstrId,
) -> Option<(InstrId, BiasAdd)> {
    let Op::Convolution(c) = &comp.get(conv).op else {
        return None;
    };
    let [fusion] = comp.users(conv)[..] else {
        return None;
    };
    let Op::Fusion { calls, .. } = comp.get(fusion).op else {
        return None;
    };
    let b = match_bias_add(m.computation(calls), c.dims.output_feature)?;
    let operands = comp.get(fusion).operands();
    let read_once = operands.iter().filter(|&&o| o == conv).count() == 1
        && operands.get(b.value as usize) == Some(&conv);
    (comp.root() != conv && read_once).then_some((fusion, b))
}

/// The same form at instruction `id` of `comp` (inside a larger fusion): the add and what
/// it reads, whatever else the computation holds.
pub(crate) fn bias_add_at(comp: &Computation, id: InstrId, feature: i64) -> Option<BiasAdd> {
    let root = comp.get(id);
    let shape = root.shape.as_array()?;
    if root.op != Op::Binary(BinaryOp::Add) || shape.element_type != ElementType::F32 {
        return None;
    }
    let [a, b] = root.operands()[..] else {
        return None;
    };
    let value_param = |id| match comp.get(id).op {
        Op::Parameter(n) if comp.get(id).shape.as_array() == Some(shape) => Some(n),
        _ => None,
    };
    let bias_param = |id| {
        let Op::Broadcast { dimensions } = &comp.get(id).op else {
            return None;
        };
        let q = comp.get(*comp.get(id).operands().first()?);
        let qs = q.shape.as_array()?;
        let features = *shape.dims.get(usize::try_from(feature).ok()?)?;
        match q.op {
            Op::Parameter(n)
                if dimensions[..] == [feature]
                    && qs.element_type == ElementType::F32
                    && qs.dims[..] == [features] =>
            {
                Some(n)
            }
            _ => None,
        }
    };
    let (value, bias) = match (value_param(a), bias_param(b)) {
        (Some(v), Some(q)) => (v, q),
        _ => (value_param(b)?, bias_param(a)?),
    };
    Some(BiasAdd { value, bias })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::hlo_text::parse_module;

    fn matched(body: &str, feature: i64) -> Option<BiasAdd> {
        let text = format!("HloModule m\n\nENTRY f {{\n{body}\n}}\n");
        let module = parse_module(&text, None).expect("parses");
        match_bias_add(module.entry(), feature)
    }

    #[test]
    fn both_operand_orders_match_and_nothing_else_does() {
        let p = "  p0 = f32[32]{0} parameter(0)\n  p1 = f32[2,3,3,32]{3,2,1,0} parameter(1)\n  \
                 b = f32[2,3,3,32]{3,2,1,0} broadcast(p0), dimensions={3}\n";
        let add = |x: &str| format!("{p}  ROOT a = f32[2,3,3,32]{{3,2,1,0}} {x}");
        assert_eq!(
            matched(&add("add(p1, b)"), 3),
            Some(BiasAdd { value: 1, bias: 0 })
        );
        assert_eq!(
            matched(&add("add(b, p1)"), 3),
            Some(BiasAdd { value: 1, bias: 0 })
        );
        // Another feature dimension, another op, an extra instruction.
        assert_eq!(matched(&add("add(p1, b)"), 1), None);
        assert_eq!(matched(&add("subtract(p1, b)"), 3), None);
        let relu = format!(
            "{p}  a = f32[2,3,3,32]{{3,2,1,0}} add(p1, b)\n  z = f32[] constant(0)\n  \
             zb = f32[2,3,3,32]{{3,2,1,0}} broadcast(z), dimensions={{}}\n  \
             ROOT r = f32[2,3,3,32]{{3,2,1,0}} maximum(a, zb)"
        );
        assert_eq!(matched(&relu, 3), None);
        // The bias broadcast over the wrong dimension of a square shape.
        let q = "  p0 = f32[3]{0} parameter(0)\n  p1 = f32[3,3]{1,0} parameter(1)\n  \
                 b = f32[3,3]{1,0} broadcast(p0), dimensions={0}\n  \
                 ROOT a = f32[3,3]{1,0} add(p1, b)";
        assert_eq!(matched(q, 1), None);
        assert_eq!(matched(q, 0), Some(BiasAdd { value: 1, bias: 0 }));
    }
}
