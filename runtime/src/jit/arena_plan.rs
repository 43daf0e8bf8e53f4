//! The JIT's memory needs, stated to the compiler's buffer assignment, whose offsets the
//! program then uses for every arena buffer.
//!
//! [`JitBufferNeeds`] tells `tessel_compiler::passes::assign_buffers_with` what the program
//! does beyond the values' bytes:
//! - 64-byte alignment ([`BUFFER_ALIGN`], for the AVX-512 routines);
//! - constants outside the arena (the executable's constant pool);
//! - `copy` names its operand's buffer (the program emits no code for it);
//! - the instructions `fusion_plan::plan` recomputes inside their users' kernels (no buffer;
//!   what they read is read where their users run);
//! - in-place writes only where the kernel reads the overwritten buffer at the index it
//!   writes ([`reads_only_aligned`]: every path from the kernel's root to it goes through
//!   elementwise ops of the output's dimensions; a kernel loads an element's inputs before it
//!   stores it, also 4 lanes at a time, and a multi-output elementwise fusion computes every
//!   output at an index before it stores any, so each output may overwrite such a buffer:
//!   Adam's two moments updated in place in a training loop's state);
//! - the forward max-pools a convolution computes in its epilogue (`routines/pool_fold.rs`):
//!   their values are written at the convolution's position;
//! - the window choices a forward max-pool writes for its gradient (`routines/pool_choices.rs`):
//!   a side output of the pool's fusion, live until the gradient reads it;
//! - the second convolution of a pair run side by side (`routines/conv_pair.rs`): its value
//!   and its scratch are written at the first's position, and both are planned for one
//!   thread;
//! - the scratch space each instruction's routine or split kernel asks for. Scratch sizes come
//!   from the same planners the program calls while emitting (`DotPlan::new`,
//!   `plan_convolution`, `reduce::reduce_split`), run here with placeholder addresses: those
//!   planners size their scratch from shapes and options only.
//!
//! [`plan_arena`] is that assignment; `program/` looks every offset up in it.

use super::buffer::Addr;
use super::fused_kernels::{fusion_plan, reduce};
use super::routines::conv_pair::PairCache;
use super::routines::conv_select::{plan_convolution, ConvPrecision};
use super::routines::dot::DotPlan;
use super::routines::pool_choices::choices_reader;
use super::routines::pool_fold::pool_writer;
use super::{JitError, JitOptions};
use crate::arena::BUFFER_ALIGN;
use std::collections::HashSet;
use tessel_compiler::ir::{Computation, ComputationId, InstrId, Module, Op};
use tessel_compiler::passes::{assign_buffers_with, BufferAssignment, BufferNeeds};

/// What the JIT's arena needs (see the module docs).
#[derive(Debug)]
pub struct JitBufferNeeds {
    pub options: JitOptions,
    /// The convolution pairs of the module being assigned.
    pairs: PairCache,
}

impl JitBufferNeeds {
    pub fn new(options: JitOptions) -> JitBufferNeeds {
        JitBufferNeeds {
            options,
            pairs: PairCache::default(),
        }
    }
}

impl BufferNeeds for JitBufferNeeds {
    fn begin(&self, _m: &Module) {
        self.pairs.clear();
    }

    fn alignment(&self) -> i64 {
        BUFFER_ALIGN as i64
    }

    fn constants_in_arena(&self) -> bool {
        false
    }

    fn scratch_bytes(&self, m: &Module, comp: ComputationId, id: InstrId) -> Vec<i64> {
        // An instruction the JIT cannot plan fails when it is compiled; it needs nothing here.
        scratch_requests(m, comp, id, &self.options, &self.pairs)
            .unwrap_or_default()
            .into_iter()
            .map(|n| n as i64)
            .collect()
    }

    fn copy_is_view(&self) -> bool {
        true
    }

    /// Every run writes every argument into the arena first (`Executable::run_in`), so a
    /// parameter read for the last time may be overwritten: a training loop's variables are
    /// updated where they were written instead of being copied into the loop's state.
    fn parameters_donated(&self) -> bool {
        true
    }

    fn written_at(&self, m: &Module, comp: ComputationId, id: InstrId) -> Option<InstrId> {
        pool_writer(m, comp, id, &self.options)
            .or_else(|| self.pairs.first_of(m, comp, id, &self.options))
    }

    fn side_output(&self, m: &Module, comp: ComputationId, id: InstrId) -> Option<(i64, InstrId)> {
        let (bytes, reader) = choices_reader(m, m.computation(comp), id, &self.options)?;
        Some((bytes as i64, reader))
    }

    fn recomputed(&self, m: &Module, comp: ComputationId) -> Vec<InstrId> {
        let mut r: Vec<InstrId> = fusion_plan::plan(m.computation(comp)).into_iter().collect();
        r.sort();
        r
    }

    fn may_write_over(
        &self,
        m: &Module,
        comp: ComputationId,
        id: InstrId,
        recomputed: &dyn Fn(InstrId) -> bool,
        holds: &dyn Fn(InstrId) -> bool,
    ) -> bool {
        let c = m.computation(comp);
        let instr = c.get(id);
        match &instr.op {
            Op::Fusion { calls, .. } => {
                let f = m.computation(*calls);
                let operands = instr.operands();
                let param_holds = |p: InstrId| match f.get(p).op {
                    Op::Parameter(n) => operands.get(n as usize).is_some_and(|&o| holds(o)),
                    _ => false,
                };
                let params: HashSet<InstrId> = f.parameters().iter().copied().collect();
                let is_param = |v: InstrId| params.contains(&v);
                match shared_loop_outputs(f) {
                    Some(elems) => elems
                        .iter()
                        .all(|&el| reads_only_aligned(f, el, &is_param, &param_holds)),
                    None => reads_only_aligned(f, f.root(), &is_param, &param_holds),
                }
            }
            op if fusion_plan::is_kernel_op(op) => {
                let materialized = |v: InstrId| v != id && !recomputed(v);
                reads_only_aligned(c, id, &materialized, holds)
            }
            // The scatter routines read every operand before they write the result
            // (`host/gather_scatter.rs`), and the row scatter-add adds into its operand's rows
            // where they are one buffer: an embedding's gradient is added into the zeros it
            // starts from instead of into a copy of them.
            Op::Scatter { .. } => match instr.operands() {
                &[operand, indices, updates] => {
                    holds(operand) && !holds(indices) && !holds(updates)
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// The outputs of a multi-output fusion `f` that the JIT computes in one elementwise loop
/// nest (`emit_fusion`), which computes every output at an index before it stores any: each
/// is an array of the first one's dimensions and none is a parameter or a reduce, window or
/// tuple. `None` for any other fusion, or one whose root is not a tuple.
fn shared_loop_outputs(f: &Computation) -> Option<Vec<InstrId>> {
    let root = f.get(f.root());
    if !matches!(root.op, Op::Tuple) {
        return None;
    }
    let elems = root.operands().to_vec();
    let dims = &f.get(*elems.first()?).shape.as_array()?.dims;
    elems
        .iter()
        .all(|&el| {
            let i = f.get(el);
            !matches!(
                i.op,
                Op::Parameter(_)
                    | Op::Reduce { .. }
                    | Op::ReduceWindow { .. }
                    | Op::SelectAndScatter { .. }
                    | Op::Tuple
            ) && i.shape.as_array().is_some_and(|a| &a.dims == dims)
        })
        .then_some(elems)
}

/// Whether the kernel computing `root` of `comp` reads the buffer `holds` names only at the
/// index it writes: every path from `root` to a materialized instruction holding it goes
/// through elementwise ops whose dimensions are the output's, and that instruction's
/// dimensions are the output's too.
pub(crate) fn reads_only_aligned(
    comp: &Computation,
    root: InstrId,
    materialized: &dyn Fn(InstrId) -> bool,
    holds: &dyn Fn(InstrId) -> bool,
) -> bool {
    let Some(out) = comp.get(root).shape.as_array() else {
        return false;
    };
    let mut seen = HashSet::new();
    let mut stack = vec![(root, true)];
    while let Some((v, aligned)) = stack.pop() {
        if !seen.insert((v, aligned)) {
            continue;
        }
        let instr = comp.get(v);
        if materialized(v) {
            let dims_match = instr.shape.as_array().is_some_and(|a| a.dims == out.dims);
            if holds(v) && !(aligned && dims_match) {
                return false;
            }
            continue;
        }
        let keep = aligned
            && instr.op.is_elementwise()
            && instr.shape.as_array().is_some_and(|a| a.dims == out.dims);
        stack.extend(instr.operands().iter().map(|&o| (o, keep)));
    }
    true
}

/// The buffer assignment of `m` with the JIT's needs under `options`.
pub fn plan_arena(m: &Module, options: &JitOptions) -> BufferAssignment {
    assign_buffers_with(m, &JitBufferNeeds::new(options.clone()))
}

/// The scratch buffers (bytes, in request order) the program asks for while emitting
/// instruction `id` of computation `comp` (`pairs`: the module's convolution pairs).
pub(crate) fn scratch_requests(
    m: &Module,
    comp: ComputationId,
    id: InstrId,
    options: &JitOptions,
    pairs: &PairCache,
) -> Result<Vec<usize>, JitError> {
    let c = m.computation(comp);
    let instr = c.get(id);
    let operand_shape = |k: usize| {
        c.get(instr.operands()[k]).shape.as_array().ok_or_else(|| {
            JitError::Invalid(format!("{}: operand {k} is not an array", instr.name))
        })
    };
    let mut sizes = Vec::new();
    // The planners only size their scratch; these addresses are never used.
    let placeholder = Addr::Arena(0);
    let mut record = |n: usize| {
        sizes.push(n);
        placeholder
    };
    match &instr.op {
        Op::Dot(dnums) => {
            DotPlan::new(
                &instr.name,
                dnums,
                (placeholder, operand_shape(0)?),
                (placeholder, operand_shape(1)?),
                placeholder,
                options.gemm,
                options.gemm_threads,
                &mut record,
            )?;
        }
        Op::Convolution(conv) => {
            let out = instr.shape.as_array().ok_or_else(|| {
                JitError::Invalid(format!("{}: convolution of a tuple", instr.name))
            })?;
            // A convolution of a pair runs on one thread (`conv_pair.rs`).
            let one_thread;
            let options = if pairs.pair_of(m, comp, id, options).is_some() {
                one_thread = options.one_thread();
                &one_thread
            } else {
                options
            };
            plan_convolution(
                &instr.name,
                conv,
                ConvPrecision::of(&instr.extra_attrs),
                (placeholder, operand_shape(0)?),
                (placeholder, operand_shape(1)?),
                (placeholder, out),
                options,
                &mut record,
            )?;
        }
        Op::Reduce { .. } => sizes.extend(split_reduce_partials(m, comp, id)),
        Op::Fusion { calls, .. } => {
            // A fused reduce (the root, or an output of a multi-output fusion) computed in
            // two parts keeps its second part in scratch.
            let f = m.computation(*calls);
            let root = f.get(f.root());
            let outputs = match root.op {
                Op::Tuple => root.operands().to_vec(),
                _ => vec![f.root()],
            };
            for out in outputs {
                sizes.extend(split_reduce_partials(m, *calls, out));
            }
        }
        _ => {}
    }
    Ok(sizes)
}

/// The partial results of reduce `red` when it is computed in two parts
/// (`reduce::reduce_split`): one buffer per output array, with its guards
/// (`reduce::partial_scratch_bytes`).
fn split_reduce_partials(m: &Module, comp: ComputationId, red: InstrId) -> Vec<usize> {
    let c = m.computation(comp);
    if reduce::reduce_split(m, c, red).is_none() {
        return Vec::new();
    }
    c.get(red)
        .shape
        .leaves()
        .iter()
        .map(|a| reduce::partial_scratch_bytes(a.byte_size() as usize))
        .collect()
}
