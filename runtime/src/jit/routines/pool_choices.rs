//! The window choices a forward max-pool records for its gradient
//! (`tessel_kernels::pooling`, "Window choices"): a conv layer's max-pool gradient reads the
//! pre-activation `z` (12.8 MB for the MNIST step's first layer) only to redo the forward's
//! select and to test `z > 0` at the chosen position. The forward pool, which reads `z` anyway,
//! writes one byte per pooled output with both answers, and the gradient reads those (0.8 MB)
//! instead.
//!
//! The pair: a forward pool fusion (`pool_match::PoolMatch::Forward`, no bias inside) and the
//! one backward pool fusion (`PoolMatch::Backward`) that reads the same `z` with the same
//! geometry and ReLU, both computed by the pooling routines. The bytes are a side output of
//! the forward fusion (`BufferNeeds::side_output`, live until the gradient), written by the
//! pooling routine or by the convolution that folds the pool (`pool_fold.rs`). The program
//! hands them to the gradient only if the forward's routine was emitted writing them
//! (`ProgramCx::choices_written`); otherwise the gradient reads `z` as before, so the two can
//! never disagree. Only where the pooling routines have AVX-512 (`tessel_kernels::pooling::vector_choices`):
//! elsewhere the choices would run in scalar loops. Where, besides, nothing else reads `z`
//! and the pool is folded into the convolution, the convolution need not store `z` at all
//! (`program/conv_pool.rs`, `PoolTargets::discard_output`).

use super::pool_match::{match_pool_fusion, PoolMatch};
use crate::jit::JitOptions;
use tessel_compiler::ir::{Computation, InstrId, Module, Op};
use tessel_kernels::cpu::Isa;
use tessel_kernels::pooling::{vector_choices, MaxPool, MaxPoolGrad, PoolGeometry};

/// Whether the pooling routines compute window choices in vector code on this machine
/// (AVX-512, `tessel_kernels::pooling::vector_choices`): elsewhere no gradient reads them.
pub fn choices_available() -> bool {
    vector_choices(Isa::detect())
}

/// The backward pool fusion that may read the window choices of forward pool fusion `id` of
/// `comp`, with their size in bytes; `None` when there is none (or more than one) or the
/// option is off.
pub(crate) fn choices_reader(
    m: &Module,
    comp: &Computation,
    id: InstrId,
    options: &JitOptions,
) -> Option<(usize, InstrId)> {
    if !options.pool_choices || !options.vectorize {
        return None;
    }
    let (true, z, geometry, relu) = pool_fusion(m, comp, id)? else {
        return None;
    };
    let pool = MaxPool::new(geometry, relu, 1).ok()?;
    // Without AVX-512 the choices run in scalar loops that cost more than they save.
    if !pool.can_choose() || !vector_choices(pool.isa) {
        return None;
    }
    let readers: Vec<InstrId> = comp
        .users(z)
        .into_iter()
        .filter(|&u| pool_fusion(m, comp, u) == Some((false, z, geometry, relu)))
        .collect();
    let [reader] = readers[..] else {
        return None;
    };
    MaxPoolGrad::new(geometry, relu, true, 1).ok()?;
    let [oh, ow] = geometry.output_hw();
    Some((geometry.batch * oh * ow * geometry.channels, reader))
}

/// What pool fusion `id` pools (forward) or chooses from (backward): whether it is the
/// forward pass, the instruction, the geometry and the ReLU. A forward pool with a bias inside
/// (the inference form) is none.
fn pool_fusion(
    m: &Module,
    comp: &Computation,
    id: InstrId,
) -> Option<(bool, InstrId, PoolGeometry, bool)> {
    let instr = comp.get(id);
    let Op::Fusion { calls, .. } = instr.op else {
        return None;
    };
    let (forward, param, geometry, relu) = match match_pool_fusion(m, m.computation(calls))? {
        PoolMatch::Forward {
            input,
            geometry,
            relu,
            bias: None,
        } => (true, input, geometry, relu),
        PoolMatch::Backward {
            z, geometry, relu, ..
        } => (false, z, geometry, relu),
        PoolMatch::Forward { bias: Some(_), .. } => return None,
    };
    Some((
        forward,
        *instr.operands().get(param as usize)?,
        geometry,
        relu,
    ))
}
