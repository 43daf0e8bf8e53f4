//! The reference interpreter: evaluates every op of the IR exactly as HLO defines it.
//!
//! Values are [`Literal`]s with typed element vectors. A computation is evaluated in
//! topological order; each value is dropped after its last use. Called computations
//! (`to_apply` of reduce, reduce-window, select-and-scatter, all-reduce) that are a single
//! binary op or compare of their parameters are recognised once and applied directly, so hot
//! loops never build scalar literals. The interpreter evaluates one replica, on the caller's
//! thread: it reaches the other replicas (collectives) and the host (infeed, outfeed) through
//! a [`ReplicaLink`] that the caller gives it (`tessel_runtime::replicas` runs replicas on
//! threads). Semantics choices are written up in `docs/interpreter.md`.

mod collectives;
mod control_flow;
mod convert;
mod convolution;
mod dot;
mod element;
mod elementwise;
mod feed;
mod gather_scatter;
mod plan;
mod precision;
mod reduce;
mod replica_link;
mod shape_ops;
mod sort;
mod topk;
mod window;

#[cfg(test)]
mod tests;

use crate::ir::{Array, ComputationId, InstrId, Literal, Module, Op, Shape};

pub use collectives::CollectiveStep;
pub use gather_scatter::{gather_source_offsets, ScatterStep};
use plan::Plan;
pub use replica_link::{CollectiveSite, LoneReplica, ReplicaLink};
pub use sort::sort_arrays;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
pub use topk::topk;

/// Why evaluation failed, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalError {
    pub message: String,
    /// The instruction that failed (innermost), if known.
    pub instruction: Option<String>,
    /// The computation holding that instruction.
    pub computation: Option<String>,
    /// The replica that failed, when several run.
    pub replica: Option<usize>,
}

impl EvalError {
    pub fn new(message: impl Into<String>) -> EvalError {
        EvalError {
            message: message.into(),
            instruction: None,
            computation: None,
            replica: None,
        }
    }

    /// Attaches the failing instruction unless an inner one is already named.
    fn at(mut self, instruction: &str, computation: &str) -> EvalError {
        if self.instruction.is_none() {
            self.instruction = Some(instruction.to_string());
            self.computation = Some(computation.to_string());
        }
        self
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(r) = self.replica {
            write!(f, "replica {r}: ")?;
        }
        if let (Some(i), Some(c)) = (&self.instruction, &self.computation) {
            write!(f, "{i} in {c}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for EvalError {}

pub(crate) type EvalResult<T> = Result<T, EvalError>;

pub(crate) fn err<T>(message: impl Into<String>) -> EvalResult<T> {
    Err(EvalError::new(message))
}

/// Evaluates the entry computation of `module` on one replica.
pub fn evaluate(module: &Module, args: &[Literal]) -> Result<Literal, EvalError> {
    evaluate_computation(module, module.entry, args)
}

/// Evaluates the entry of `module` as the replica `link` stands for: its collectives meet the
/// other replicas and its `infeed`/`outfeed` reach the host through `link`. The error does not
/// name the replica (the caller knows which one it ran).
pub fn evaluate_linked(
    module: &Module,
    args: &[Literal],
    link: &dyn ReplicaLink,
) -> Result<Literal, EvalError> {
    let ev = Evaluator::new(module, link);
    ev.check_args(module.entry, args)?;
    let refs: Vec<&Literal> = args.iter().collect();
    ev.eval_computation(module.entry, &refs)
}

/// Evaluates one computation of `module` (e.g. for constant folding) on one replica.
pub(crate) fn evaluate_computation(
    module: &Module,
    comp: ComputationId,
    args: &[Literal],
) -> Result<Literal, EvalError> {
    if comp.0 as usize >= module.computations.len() {
        return err(format!("{comp} does not exist in module {}", module.name));
    }
    let ev = Evaluator::new(module, &LoneReplica);
    ev.check_args(comp, args)?;
    let refs: Vec<&Literal> = args.iter().collect();
    ev.eval_computation(comp, &refs)
}

/// Evaluates computations of one module for one replica.
pub(crate) struct Evaluator<'m> {
    pub(crate) module: &'m Module,
    plans: Vec<std::sync::OnceLock<Plan>>,
    /// The replica this evaluator runs as: collectives, `infeed` and `outfeed` go through it.
    pub(crate) link: &'m dyn ReplicaLink,
}

impl<'m> Evaluator<'m> {
    fn new(module: &'m Module, link: &'m dyn ReplicaLink) -> Evaluator<'m> {
        // Planned when first run: constant folding evaluates one small computation of a
        // module whose others (a training loop's body) it never runs.
        let plans = module
            .computation_ids()
            .map(|_| std::sync::OnceLock::new())
            .collect();
        Evaluator {
            module,
            plans,
            link,
        }
    }

    pub(crate) fn plan(&self, comp: ComputationId) -> &Plan {
        self.plans[comp.0 as usize].get_or_init(|| Plan::new(self.module, comp))
    }

    /// Checks that the arguments match the computation's parameters, naming both on a mismatch.
    fn check_args(&self, comp: ComputationId, args: &[Literal]) -> EvalResult<()> {
        let c = self.module.computation(comp);
        let params = c.parameters();
        if params.len() != args.len() {
            return err(format!(
                "{} takes {} arguments, {} given",
                c.name,
                params.len(),
                args.len()
            ));
        }
        for (i, (&p, a)) in params.iter().zip(args).enumerate() {
            let want = &c.get(p).shape;
            let got = a.shape();
            if !shapes_match(want, &got) {
                return err(format!(
                    "argument {i} of {} ({}) should be {}, got {}",
                    c.name,
                    c.get(p).name,
                    want.to_text(false),
                    got.to_text(false)
                ));
            }
        }
        Ok(())
    }

    /// Evaluates computation `comp` on `args` (one per parameter, in parameter order).
    pub(crate) fn eval_computation(
        &self,
        comp: ComputationId,
        args: &[&Literal],
    ) -> EvalResult<Literal> {
        let c = self.module.computation(comp);
        let plan = self.plan(comp);
        let mut values: Vec<Option<Cow<Literal>>> = vec![None; plan.slots];
        let mut remaining = plan.use_counts.clone();
        // f32 values of bf16 ops that a convert reads unrounded (`precision.rs`).
        let mut unrounded: HashMap<InstrId, Array> = HashMap::new();
        for &id in &plan.order {
            let instr = c.get(id);
            let value: Cow<Literal> = match &instr.op {
                Op::Parameter(n) => match args.get(*n as usize) {
                    Some(a) => Cow::Borrowed(*a),
                    None => {
                        return Err(EvalError::new(format!(
                            "parameter {n} has no argument ({} given)",
                            args.len()
                        ))
                        .at(&instr.name, &c.name))
                    }
                },
                op => {
                    let operands: Vec<&Literal> = instr
                        .operands()
                        .iter()
                        .map(|o| {
                            values[o.index()]
                                .as_deref()
                                .expect("operands are evaluated first")
                        })
                        .collect();
                    let wide = match op {
                        Op::Convert => instr.operands().first().and_then(|o| unrounded.get(o)),
                        _ => None,
                    };
                    let v = match wide {
                        // The convert reads the bf16 op's f32 value (`precision.rs`).
                        Some(w) => convert::convert(w, out_array(&instr.shape)?.element_type)
                            .map(Literal::Array),
                        None => ensure_allocatable(&instr.shape).and_then(|()| {
                            self.eval_instruction(comp, id, op, &instr.shape, &operands)
                        }),
                    }
                    .map_err(|e| e.at(&instr.name, &c.name))?;
                    if plan.unrounded.contains(&id) {
                        let arrays = arrays(&operands).map_err(|e| e.at(&instr.name, &c.name))?;
                        let w = precision::eval_in_f32(op, &arrays)
                            .map_err(|e| e.at(&instr.name, &c.name))?;
                        unrounded.insert(id, w);
                    }
                    Cow::Owned(v)
                }
            };
            values[id.index()] = Some(value);
            for o in instr.operands() {
                let r = &mut remaining[o.index()];
                *r -= 1;
                if *r == 0 {
                    values[o.index()] = None;
                }
            }
        }
        let root = c.root();
        Ok(values[root.index()]
            .take()
            .expect("the root is evaluated")
            .into_owned())
    }

    /// Evaluates one instruction given its operands' values.
    fn eval_instruction(
        &self,
        comp: ComputationId,
        id: InstrId,
        op: &Op,
        shape: &Shape,
        operands: &[&Literal],
    ) -> EvalResult<Literal> {
        use Op::*;
        let out = match op {
            Parameter(_) => unreachable!("parameters are bound by eval_computation"),
            Constant(l) => l.clone(),
            Iota { dimension } => shape_ops::iota(out_array(shape)?, *dimension)?.into(),
            Broadcast { dimensions } => {
                shape_ops::broadcast(arr(operands, 0)?, out_array(shape)?, dimensions)?.into()
            }
            Reshape | Bitcast => shape_ops::reshape(arr(operands, 0)?, out_array(shape)?)?.into(),
            Transpose { permutation } => {
                shape_ops::transpose(arr(operands, 0)?, permutation)?.into()
            }
            Slice { dims } => shape_ops::slice(arr(operands, 0)?, dims)?.into(),
            DynamicSlice { sizes } => {
                shape_ops::dynamic_slice(arr(operands, 0)?, &arrays(&operands[1..])?, sizes)?.into()
            }
            DynamicUpdateSlice => shape_ops::dynamic_update_slice(
                arr(operands, 0)?,
                arr(operands, 1)?,
                &arrays(&operands[2..])?,
            )?
            .into(),
            Concatenate { dimension } => {
                shape_ops::concatenate(&arrays(operands)?, *dimension)?.into()
            }
            Pad { dims } => shape_ops::pad(arr(operands, 0)?, arr(operands, 1)?, dims)?.into(),
            Reverse { dimensions } => shape_ops::reverse(arr(operands, 0)?, dimensions)?.into(),
            TopK { k, largest } => topk::topk(arr(operands, 0)?, *k, *largest)?,
            Sort {
                dimension,
                to_apply,
                ..
            } => sort::sort(self, &arrays(operands)?, *dimension, *to_apply)?,
            Convert => convert::convert(arr(operands, 0)?, out_array(shape)?.element_type)?.into(),
            BitcastConvert => {
                convert::bitcast_convert(arr(operands, 0)?, out_array(shape)?)?.into()
            }
            Copy => operands
                .first()
                .map(|l| (*l).clone())
                .ok_or_else(|| EvalError::new("copy needs an operand"))?,
            Unary(u) => elementwise::unary(*u, arr(operands, 0)?)?.into(),
            Binary(b) => elementwise::binary(*b, arr(operands, 0)?, arr(operands, 1)?)?.into(),
            Compare {
                direction,
                comparison_type,
            } => elementwise::compare(
                *direction,
                *comparison_type,
                arr(operands, 0)?,
                arr(operands, 1)?,
            )?
            .into(),
            Select => {
                elementwise::select(arr(operands, 0)?, arr(operands, 1)?, arr(operands, 2)?)?.into()
            }
            Clamp => {
                elementwise::clamp(arr(operands, 0)?, arr(operands, 1)?, arr(operands, 2)?)?.into()
            }
            Reduce {
                dimensions,
                to_apply,
            } => reduce::reduce(self, &arrays(operands)?, dimensions, *to_apply, shape)?,
            ReduceWindow { window, to_apply } => {
                window::reduce_window(self, &arrays(operands)?, window, *to_apply, shape)?
            }
            SelectAndScatter {
                window,
                select,
                scatter,
            } => window::select_and_scatter(
                self,
                arr(operands, 0)?,
                arr(operands, 1)?,
                arr(operands, 2)?,
                window,
                *select,
                *scatter,
            )?
            .into(),
            Dot(dims) => dot::dot(
                arr(operands, 0)?,
                arr(operands, 1)?,
                dims,
                out_array(shape)?,
            )?
            .into(),
            Convolution(conv) => convolution::convolution(
                arr(operands, 0)?,
                arr(operands, 1)?,
                conv,
                out_array(shape)?,
            )?
            .into(),
            Gather {
                dims, slice_sizes, ..
            } => gather_scatter::gather(
                arr(operands, 0)?,
                arr(operands, 1)?,
                dims,
                slice_sizes,
                out_array(shape)?,
            )?
            .into(),
            Scatter { dims, to_apply, .. } => {
                if operands.len() != 3 {
                    return err("tessel supports one array per scatter");
                }
                gather_scatter::scatter(
                    self,
                    arr(operands, 0)?,
                    arr(operands, 1)?,
                    arr(operands, 2)?,
                    dims,
                    *to_apply,
                )?
                .into()
            }
            Tuple => Literal::Tuple(operands.iter().map(|l| (*l).clone()).collect()),
            GetTupleElement { index } => {
                control_flow::get_tuple_element(operand(operands, 0)?, *index)?
            }
            Call { to_apply } => self.eval_computation(*to_apply, operands)?,
            Fusion { calls, .. } => self.eval_computation(*calls, operands)?,
            While { condition, body } => {
                control_flow::while_loop(self, *condition, *body, operand(operands, 0)?)?
            }
            Conditional { branches } => control_flow::conditional(self, branches, operands)?,
            CustomCall { target, .. } => control_flow::custom_call(target, operands, shape)?,
            AfterAll => Literal::Token,
            Infeed { .. } => feed::infeed(self.link, shape)?,
            Outfeed { .. } => feed::outfeed(self.link, operand(operands, 0)?)?,
            AllReduce { .. }
            | AllGather { .. }
            | ReduceScatter { .. }
            | CollectivePermute { .. }
            | AllToAll { .. }
            | ReplicaId
            | PartitionId => collectives::eval_collective(self, comp, id, op, operands)?,
        };
        if !shapes_match(shape, &out.shape()) {
            return err(format!(
                "{} produced {} but the instruction's shape is {}",
                op.opcode_name(),
                out.shape().to_text(false),
                shape.to_text(false)
            ));
        }
        Ok(out)
    }
}

/// Shapes are equal for evaluation purposes (layouts are not part of the IR).
fn shapes_match(a: &Shape, b: &Shape) -> bool {
    match (a, b) {
        (Shape::Array(x), Shape::Array(y)) => x.element_type == y.element_type && x.dims == y.dims,
        (Shape::Tuple(x), Shape::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| shapes_match(a, b))
        }
        (Shape::Token, Shape::Token) => true,
        _ => false,
    }
}

fn operand<'a>(operands: &[&'a Literal], i: usize) -> EvalResult<&'a Literal> {
    operands
        .get(i)
        .copied()
        .ok_or_else(|| EvalError::new(format!("operand {i} is missing")))
}

/// Values at least this large are tried with a fallible allocation before they are computed.
const PROBE_BYTES: u64 = 64 << 20;

/// Fails, instead of aborting the process, when a value of `shape` cannot be allocated: the
/// op kernels allocate with `vec!`, which aborts on failure. Large values are tried first
/// with `try_reserve_exact` (released at once; the kernel then allocates for real).
fn ensure_allocatable(shape: &Shape) -> EvalResult<()> {
    for leaf in shape.leaves() {
        let bytes = leaf
            .checked_byte_size()
            .map_or(u64::MAX, |b| b.max(0) as u64);
        if bytes < PROBE_BYTES {
            continue;
        }
        let fits = usize::try_from(bytes)
            .ok()
            .is_some_and(|n| Vec::<u8>::new().try_reserve_exact(n).is_ok());
        if !fits {
            return Err(EvalError::new(format!(
                "needs {bytes} bytes for its value {}, which cannot be allocated",
                Shape::Array(leaf.clone()).to_text(false)
            )));
        }
    }
    Ok(())
}

fn arr<'a>(operands: &[&'a Literal], i: usize) -> EvalResult<&'a Array> {
    operand(operands, i)?.as_array().ok_or_else(|| {
        EvalError::new(format!(
            "operand {i} should be an array, got {}",
            operands[i].shape().to_text(false)
        ))
    })
}

fn arrays<'a>(operands: &[&'a Literal]) -> EvalResult<Vec<&'a Array>> {
    (0..operands.len()).map(|i| arr(operands, i)).collect()
}

fn out_array(shape: &Shape) -> EvalResult<&crate::ir::ArrayShape> {
    shape.as_array().ok_or_else(|| {
        EvalError::new(format!(
            "the result should be an array, the instruction says {}",
            shape.to_text(false)
        ))
    })
}
