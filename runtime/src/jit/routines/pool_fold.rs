//! The forward max-pool a convolution routine computes in its epilogue
//! (`tessel_kernels::pooling::PoolEpilogue`): a conv layer is `conv`, its bias add (folded into
//! the convolution's stores, `bias_match.rs`), then `reduce-window(max(z, 0))`. As its own
//! routine the pool reads the whole activation back from memory (12.8 MB for the MNIST step's
//! first layer); in the epilogue it reads each block while the convolution has it in cache.
//! Where the activation is kept for nothing else (inference), the optimizer puts the bias
//! add, the ReLU and the pool in one fusion, which would otherwise run as a generated kernel;
//! the routine then adds that bias in its stores too.
//!
//! The fold needs the pool's output written at the convolution's position, so the buffer
//! assignment is told (`JitBufferNeeds::written_at`, [`pool_writer`]) and keeps that buffer
//! clear of everything live from the convolution on. The program folds a pool only where the
//! assignment did (`BufferAssignment::written_early`), so the two cannot disagree.

use super::bias_match::lone_bias_add;
use super::conv_epilogue::PoolTargets;
use super::conv_select::{plan_convolution, ConvPrecision};
use super::pool_match::{match_pool_fusion, PoolMatch};
use crate::jit::buffer::Addr;
use crate::jit::JitOptions;
use tessel_compiler::ir::{Computation, ComputationId, InstrId, Module, Op};
use tessel_kernels::pooling::{MaxPool, PoolGeometry};

/// A forward max-pool fusion that reads a convolution's result: directly, through the bias
/// add that alone reads the convolution (`bias_add`, a fusion of its own), or with the bias
/// add inside the pool's fusion (`fused_bias`, its parameter: the inference form, where the
/// convolution's result is read by nothing else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolSource {
    pub conv: InstrId,
    pub bias_add: Option<InstrId>,
    pub fused_bias: Option<u32>,
    pub geometry: PoolGeometry,
    pub relu: bool,
}

/// The source of fusion `id` of `comp`, if it is such a pool (structure only: whether the
/// convolution's routine takes it is decided when the convolution is planned).
pub(crate) fn pool_source(m: &Module, comp: &Computation, id: InstrId) -> Option<PoolSource> {
    let instr = comp.get(id);
    let Op::Fusion { calls, .. } = instr.op else {
        return None;
    };
    let PoolMatch::Forward {
        input,
        geometry,
        relu,
        bias,
    } = match_pool_fusion(m, m.computation(calls))?
    else {
        return None;
    };
    let operands = instr.operands();
    let z = *operands.get(input as usize)?;
    // The convolution's result is changed by nothing but this pool's fold (its routine adds
    // a fused bias to it): nothing else may read it.
    let alone = |conv: InstrId, reader: InstrId| {
        comp.users(conv)[..] == [reader]
            && comp.root() != conv
            && operands.iter().filter(|&&o| o == conv).count() == 1
    };
    if let Op::Convolution(_) = comp.get(z).op {
        if bias.is_some() && !alone(z, id) {
            return None;
        }
        return Some(PoolSource {
            conv: z,
            bias_add: None,
            fused_bias: bias,
            geometry,
            relu,
        });
    }
    // `z` the bias add that alone reads a convolution (what `conv_bias.rs` folds).
    let conv = comp
        .get(z)
        .operands()
        .iter()
        .copied()
        .find(|&o| lone_bias_add(m, comp, o).is_some_and(|(add, _)| add == z))?;
    bias.is_none().then_some(PoolSource {
        conv,
        bias_add: Some(z),
        fused_bias: None,
        geometry,
        relu,
    })
}

/// The pool's routine, as the convolution's epilogue runs it.
pub(crate) fn epilogue_pool(source: &PoolSource, options: &JitOptions) -> Option<MaxPool> {
    MaxPool::new(source.geometry, source.relu, options.gemm_threads).ok()
}

/// The convolution whose routine writes fusion `id`'s value (`JitBufferNeeds::written_at`):
/// the pool's source convolution, when folding is on and its planned routine takes the pool
/// (and, through a bias add, the bias too).
pub(crate) fn pool_writer(
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
    let any_bias = source.bias_add.is_some() || source.fused_bias.is_some();
    if any_bias && !options.fold_bias_add {
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
    let fused_bias = source.fused_bias.map(|_| placeholder);
    let pool = epilogue_pool(&source, options)?;
    let to = PoolTargets {
        output: placeholder,
        choices: None,
        discard_output: false,
    };
    (bias_taken && routine.take_pool(pool, to, fused_bias)).then_some(source.conv)
}
