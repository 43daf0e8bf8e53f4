//! The counter of a `while` loop with a fixed trip count, as JAX's `fori_loop` and
//! `scan` emit it: one state element `i` starts at a constant `c0`, the body adds 1 to it,
//! and the condition is `i < n` (or `i <= n`, `n > i`, `n >= i`) with `n` a constant or a
//! state element that the body passes through unchanged and that starts at a constant. The
//! trip count is then `N = n - c0` (`+1` for `<=`).
//!
//! Used by the `while` gradient rule (`autodiff/rules_while.rs`) and the loop unroller
//! (`passes/while_loop_unroller.rs`).

use crate::ir::{
    BinaryOp, ComparisonDirection as Dir, ComputationId, ElementType, InstrId, Literal, Module, Op,
};

/// The counting state element of a loop and its trip count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Counter {
    /// Its index in the loop's state tuple.
    pub index: usize,
    /// Its initial value.
    pub start: i64,
    /// How many times the body runs (at most 0 when it never runs).
    pub trips: i64,
    pub ty: ElementType,
}

fn scalar_int(literal: &Literal) -> Option<i64> {
    let a = literal.as_array()?;
    (a.shape.rank() == 0 && a.element_type().is_integer()).then(|| a.data.get_i64(0))
}

/// Is `id` in `comp` the `index`-th element of the computation's parameter?
fn is_state_element(module: &Module, comp: ComputationId, id: InstrId, index: usize) -> bool {
    let c = module.computation(comp);
    let instr = c.get(id);
    matches!(instr.op, Op::GetTupleElement { index: i } if i as usize == index)
        && matches!(c.get(instr.operand(0)).op, Op::Parameter(0))
}

fn state_index(module: &Module, comp: ComputationId, id: InstrId) -> Option<usize> {
    let c = module.computation(comp);
    let instr = c.get(id);
    match instr.op {
        Op::GetTupleElement { index } if matches!(c.get(instr.operand(0)).op, Op::Parameter(0)) => {
            Some(index as usize)
        }
        _ => None,
    }
}

/// The constant that element `index` of the loop's initial state holds.
fn initial_constant(
    module: &Module,
    comp: ComputationId,
    init: InstrId,
    index: usize,
) -> Option<i64> {
    let comp = module.computation(comp);
    let instr = comp.get(init);
    match &instr.op {
        Op::Tuple => match &comp.get(*instr.operands().get(index)?).op {
            Op::Constant(l) => scalar_int(l),
            _ => None,
        },
        Op::Constant(Literal::Tuple(parts)) => scalar_int(parts.get(index)?),
        _ => None,
    }
}

/// The counter of the loop `while(init), condition=condition, body=body` in computation
/// `comp`, or why it has none (the module doc gives the form).
pub(crate) fn find_counter(
    module: &Module,
    comp: ComputationId,
    init: InstrId,
    condition: ComputationId,
    body: ComputationId,
) -> Result<Counter, String> {
    let cond = module.computation(condition);
    let root = cond.get(cond.root());
    let Op::Compare { direction, .. } = root.op else {
        return Err("the condition is not a comparison".into());
    };
    let (a, b) = (root.operand(0), root.operand(1));
    // Normalize to `counter (<|<=) limit`.
    let (counter_id, limit_id, inclusive) = match direction {
        Dir::Lt => (a, b, false),
        Dir::Le => (a, b, true),
        Dir::Gt => (b, a, false),
        Dir::Ge => (b, a, true),
        _ => return Err("the condition is not <, <=, > or >=".into()),
    };
    let index = state_index(module, condition, counter_id)
        .ok_or("the condition does not compare a state element")?;
    let body_comp = module.computation(body);
    let body_root = body_comp.get(body_comp.root());
    if body_root.op != Op::Tuple {
        return Err("the body's root is not a tuple".into());
    }
    let passes_through = |k: usize| {
        body_root
            .operands()
            .get(k)
            .is_some_and(|&o| is_state_element(module, body, o, k))
    };
    let limit = match &cond.get(limit_id).op {
        Op::Constant(l) => scalar_int(l).ok_or("the loop limit is not an integer scalar")?,
        Op::GetTupleElement { .. } => {
            let k = state_index(module, condition, limit_id)
                .ok_or("the loop limit is not a constant")?;
            if !passes_through(k) {
                return Err(format!(
                    "the loop limit (state element {k}) changes in the body"
                ));
            }
            initial_constant(module, comp, init, k).ok_or(format!(
                "the loop limit (state element {k}) does not start as a constant"
            ))?
        }
        _ => return Err("the loop limit is not a constant".into()),
    };
    let step = body_root
        .operands()
        .get(index)
        .map(|&o| body_comp.get(o))
        .ok_or("the body does not produce the counter")?;
    let increments = step.op == Op::Binary(BinaryOp::Add) && {
        let (x, y) = (step.operand(0), step.operand(1));
        let is_one = |id: InstrId| match &body_comp.get(id).op {
            Op::Constant(l) => scalar_int(l) == Some(1),
            _ => false,
        };
        (is_state_element(module, body, x, index) && is_one(y))
            || (is_state_element(module, body, y, index) && is_one(x))
    };
    if !increments {
        return Err(format!("the body does not add 1 to state element {index}"));
    }
    let start = initial_constant(module, comp, init, index).ok_or(format!(
        "the counter (state element {index}) does not start as a constant"
    ))?;
    let ty = cond
        .get(counter_id)
        .shape
        .element_type()
        .ok_or("the counter is not an array")?;
    let trips = limit - start + i64::from(inclusive);
    Ok(Counter {
        index,
        start,
        trips,
        ty,
    })
}
