//! What the evaluator precomputes per computation: an evaluation order, use counts (to drop
//! values early), and whether the computation is one binary op or compare of its parameters.

use crate::ir::{BinaryOp, ComparisonDirection, ComparisonType, ComputationId, Module, Op};

/// A computation `(p0, p1) -> op(p0, p1)` (or `op(p1, p0)`), recognised so that reductions
/// can apply `op` directly instead of evaluating the computation per element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ScalarFn {
    Binary {
        op: BinaryOp,
        swapped: bool,
    },
    Compare {
        direction: ComparisonDirection,
        comparison_type: Option<ComparisonType>,
        swapped: bool,
    },
}

pub(crate) struct Plan {
    /// Instructions in evaluation order (operands first).
    pub(crate) order: Vec<crate::ir::InstrId>,
    /// One value slot per node index.
    pub(crate) slots: usize,
    /// How many operand slots read each node (plus one for the root, so it is never dropped).
    pub(crate) use_counts: Vec<u32>,
    pub(crate) scalar_fn: Option<ScalarFn>,
    /// bf16 ops whose unrounded f32 value a convert reads (`precision.rs`).
    pub(crate) unrounded: hashbrown::HashSet<crate::ir::InstrId>,
}

impl Plan {
    pub(crate) fn new(module: &Module, comp: ComputationId) -> Plan {
        let c = module.computation(comp);
        let order = if c.has_root() {
            reachable_from_root(c)
        } else {
            Vec::new()
        };
        let slots = order.iter().map(|id| id.index() + 1).max().unwrap_or(0);
        let mut use_counts = vec![0u32; slots];
        for &id in &order {
            for o in c.get(id).operands() {
                use_counts[o.index()] += 1;
            }
        }
        if c.has_root() {
            use_counts[c.root().index()] += 1;
        }
        let unrounded = super::precision::unrounded_sources(c, &order);
        Plan {
            order,
            slots,
            use_counts,
            scalar_fn: recognise_scalar_fn(module, comp),
            unrounded,
        }
    }
}

/// The instructions the root depends on, in topological order: dead code is not evaluated
/// (so it cannot fail or cost time), as in XLA where it would be removed.
fn reachable_from_root(c: &crate::ir::Computation) -> Vec<crate::ir::InstrId> {
    let mut live = hashbrown::HashSet::new();
    let mut stack = vec![c.root()];
    while let Some(id) = stack.pop() {
        if live.insert(id) {
            stack.extend(c.get(id).operands().iter().copied());
        }
    }
    c.post_order()
        .into_iter()
        .filter(|id| live.contains(id))
        .collect()
}

fn recognise_scalar_fn(module: &Module, comp: ComputationId) -> Option<ScalarFn> {
    let c = module.computation(comp);
    if !c.has_root() || c.parameters().len() != 2 {
        return None;
    }
    let root = c.get(c.root());
    let ops = root.operands();
    if ops.len() != 2 {
        return None;
    }
    let param_number = |i: usize| match c.get(ops[i]).op {
        Op::Parameter(n) => Some(n),
        _ => None,
    };
    let swapped = match (param_number(0)?, param_number(1)?) {
        (0, 1) => false,
        (1, 0) => true,
        _ => return None,
    };
    // Both parameters must be scalars of the root's type (a true scalar reducer).
    let p_shape = &c.get(ops[0]).shape;
    if p_shape.rank() != 0 || !p_shape.is_array() {
        return None;
    }
    match &root.op {
        Op::Binary(op) => Some(ScalarFn::Binary { op: *op, swapped }),
        Op::Compare {
            direction,
            comparison_type,
        } => Some(ScalarFn::Compare {
            direction: *direction,
            comparison_type: *comparison_type,
            swapped,
        }),
        _ => None,
    }
}
