//! The forward max-pool a convolution routine computes in its epilogue
//! (`tessel_kernels::pooling::PoolEpilogue`): a conv layer is `conv`, its bias add (folded into
//! the convolution's stores, `bias_match.rs`), then `reduce-window(max(z, 0))`. As its own
//! routine the pool reads the whole activation back from memory (12.8 MB for the MNIST step's
//! first layer); in the epilogue it reads each block while the convolution has it in cache.
//!
//! The fold needs the pool's output written at the convolution's position, so the buffer
//! assignment is told (`JitBufferNeeds::written_at`, [`pool_writer`]) and keeps that buffer
//! clear of everything live from the convolution on. The program folds a pool only where the
//! assignment did (`BufferAssignment::written_early`), so the two cannot disagree.

use super::bias_match::match_bias_add;
use super::conv_select::{plan_convolution, ConvPrecision};
use super::pool_match::{match_pool_fusion, PoolMatch};
use crate::jit::buffer::Addr;
use crate::jit::JitOptions;
use tessel_compiler::ir::{Computation, ComputationId, InstrId, Module, Op};
use tessel_kernels::pooling::{MaxPool, PoolGeometry};

/// A forward max-pool fusion that reads a convolution's result, directly or through the bias
/// add that alone reads the convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolSource {
    pub conv: InstrId,
    pub bias_add: Option<InstrId>,
    pub geometry: PoolGeometry,
    pub relu: bool,
}

/// The source of fusion `id` of `comp`, if it is such a pool (structure only: whether the
/// convolution's routine takes it is decided when the convolution is planned).
pub fn pool_source(m: &Module, comp: &Computation, id: InstrId) -> Option<PoolSource> {
    let instr = comp.get(id);
    let Op::Fusion { calls, .. } = instr.op else {
        return None;
    };
    let PoolMatch::Forward {
        input,
        geometry,
        relu,
    } = match_pool_fusion(m, m.computation(calls))?
    else {
        return None;
    };
    let z = *instr.operands().get(input as usize)?;
    if let Op::Convolution(_) = comp.get(z).op {
        return Some(PoolSource {
            conv: z,
            bias_add: None,
            geometry,
            relu,
        });
    }
    // `z` a bias add over a convolution that nothing else reads (what `conv_bias.rs` folds).
    let Op::Fusion { calls: add, .. } = comp.get(z).op else {
        return None;
    };
    let operands = comp.get(z).operands();
    let conv = operands
        .iter()
        .copied()
        .find(|&o| matches!(comp.get(o).op, Op::Convolution(_)))?;
    let Op::Convolution(c) = &comp.get(conv).op else {
        return None;
    };
    let bias = match_bias_add(m.computation(add), c.dims.output_feature)?;
    let single_reader = comp.users(conv)[..] == [z] && comp.root() != conv;
    let read_once = operands.iter().filter(|&&o| o == conv).count() == 1
        && operands.get(bias.value as usize) == Some(&conv);
    (single_reader && read_once).then_some(PoolSource {
        conv,
        bias_add: Some(z),
        geometry,
        relu,
    })
}

/// The pool's routine, as the convolution's epilogue runs it.
pub fn epilogue_pool(source: &PoolSource, options: &JitOptions) -> Option<MaxPool> {
    MaxPool::new(source.geometry, source.relu, options.gemm_threads).ok()
}

/// The convolution whose routine writes fusion `id`'s value (`JitBufferNeeds::written_at`):
/// the pool's source convolution, when folding is on and its planned routine takes the pool
/// (and, through a bias add, the bias too).
pub fn pool_writer(
    m: &Module,
    comp: ComputationId,
    id: InstrId,
    options: &JitOptions,
) -> Option<InstrId> {
    if !options.fold_pool || !options.vectorize {
        return None;
    }
    let c = m.computation(comp);
    let source = pool_source(m, c, id)?;
    if source.bias_add.is_some() && !options.fold_bias_add {
        return None;
    }
    let instr = c.get(source.conv);
    let Op::Convolution(conv) = &instr.op else {
        return None;
    };
    let shape = |k: usize| c.get(instr.operands()[k]).shape.as_array();
    // Planned only to ask the routine; these addresses are never used.
    let placeholder = Addr::Arena(0);
    let mut routine = plan_convolution(
        &instr.name,
        conv,
        ConvPrecision::of(&instr.extra_attrs),
        (placeholder, shape(0)?),
        (placeholder, shape(1)?),
        (placeholder, instr.shape.as_array()?),
        options,
        &mut |_| placeholder,
    )
    .ok()?;
    let bias_taken = source.bias_add.is_none() || routine.take_bias(placeholder);
    let pool = epilogue_pool(&source, options)?;
    (bias_taken && routine.take_pool(pool, placeholder)).then_some(source.conv)
}
