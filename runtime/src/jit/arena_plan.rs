//! The JIT's memory needs, stated to the compiler's buffer assignment.
//!
//! [`JitBufferNeeds`] tells `tessel_compiler::passes::assign_buffers_with` what the JIT's
//! arena needs beyond the values' bytes: 64-byte alignment ([`BUFFER_ALIGN`], for the AVX-512
//! routines), constants outside the arena (the executable's constant pool), and the scratch
//! space each instruction's routine or split kernel asks for. Scratch sizes come from the
//! same planners the program calls while emitting (`DotPlan::new`, `plan_convolution`,
//! `reduce::reduce_split`), run here with placeholder addresses: those planners size their
//! scratch from shapes and options only.
//!
//! [`plan_arena`] is that assignment. The program still lays out its arena online
//! (`ArenaLayout`); `tests/tests/jit_arena_plan.rs` checks that every scratch request the
//! program makes is one the plan holds, and compares the two arena sizes.

use super::buffer::Addr;
use super::conv_select::{plan_convolution, ConvPrecision};
use super::gemm::DotPlan;
use super::{reduce, JitError, JitOptions};
use crate::arena::BUFFER_ALIGN;
use tessel_compiler::ir::{ComputationId, InstrId, Module, Op};
use tessel_compiler::passes::{assign_buffers_with, BufferAssignment, BufferNeeds};

/// What the JIT's arena needs (see the module docs).
pub struct JitBufferNeeds<'o> {
    pub options: &'o JitOptions,
}

impl BufferNeeds for JitBufferNeeds<'_> {
    fn alignment(&self) -> i64 {
        BUFFER_ALIGN as i64
    }

    fn constants_in_arena(&self) -> bool {
        false
    }

    fn scratch_bytes(&self, m: &Module, comp: ComputationId, id: InstrId) -> Vec<i64> {
        // An instruction the JIT cannot plan fails when it is compiled; it needs nothing here.
        scratch_requests(m, comp, id, self.options)
            .unwrap_or_default()
            .into_iter()
            .map(|n| n as i64)
            .collect()
    }
}

/// The buffer assignment of `m` with the JIT's needs under `options`.
pub fn plan_arena(m: &Module, options: &JitOptions) -> BufferAssignment {
    assign_buffers_with(m, &JitBufferNeeds { options })
}

/// The scratch buffers (bytes, in request order) the program asks for while emitting
/// instruction `id` of computation `comp`.
pub fn scratch_requests(
    m: &Module,
    comp: ComputationId,
    id: InstrId,
    options: &JitOptions,
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
/// (`reduce::reduce_split`): one buffer per output array.
fn split_reduce_partials(m: &Module, comp: ComputationId, red: InstrId) -> Vec<usize> {
    let c = m.computation(comp);
    if reduce::reduce_split(m, c, red).is_none() {
        return Vec::new();
    }
    c.get(red)
        .shape
        .leaves()
        .iter()
        .map(|a| a.byte_size() as usize)
        .collect()
}
