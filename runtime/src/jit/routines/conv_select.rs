//! Chooses how a convolution runs: a specialized routine where one fits its shape, otherwise
//! the general patch-matrix GEMM of `convolution.rs`, which handles every convolution the IR
//! can express.
//!
//! Every specialized routine checks its own preconditions and declines (returns `None`) for
//! anything else, so adding one never changes which convolutions compile.

use super::conv_direct::{direct_conv_routine, plan_direct_weight_grad, DirectConvPlan};
use super::conv_epilogue::PoolTargets;
use super::conv_phase::plan_phase_conv;
use super::conv_shape::ConvOperands;
use super::conv_strided_wgrad::plan_strided_weight_grad;
use super::convolution::{conv_routine, ConvPlan};
use super::operand_plan::{operand_routine, OperandPlan, OperandRoutine};
use super::winograd::{
    winograd_filter_routine, winograd_routine, WinogradFilterPlan, WinogradPlan,
};
use super::winograd_1d::{plan_winograd_1d, plan_winograd_1d_filter};
use crate::jit::buffer::Addr;
use crate::jit::{ConvAlgorithm, JitError, JitOptions};
use std::any::Any;
use tessel_compiler::ir::{ArrayShape, Convolution};
use tessel_kernels::pooling::{MaxPool, PoolEpilogue};

/// How exactly the HLO asks a convolution to be computed: its `operand_precision`
/// attribute, XLA's `PrecisionConfig`.
///
/// XLA lets `DEFAULT` be the fastest algorithm the backend has, even one that gives up
/// precision (on a TPU, f32 operands are then multiplied in one bfloat16 pass), and reserves
/// `HIGH` and `HIGHEST` for users who need more. tessel follows the same contract: Winograd,
/// whose transforms round more than a direct sum, is used only at `DEFAULT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvPrecision {
    /// `DEFAULT` on both operands, or no attribute: any algorithm.
    Fast,
    /// `HIGH` or `HIGHEST` (or a value tessel does not know) on either operand: only the
    /// algorithms that sum the products directly (the direct loops and the patch GEMM).
    Exact,
}

impl ConvPrecision {
    /// Reads `operand_precision={..}` from an instruction's uninterpreted attributes.
    pub fn of(extra_attrs: &[(String, String)]) -> ConvPrecision {
        let Some((_, value)) = extra_attrs.iter().find(|(k, _)| k == "operand_precision") else {
            return ConvPrecision::Fast;
        };
        let fast = value
            .trim_matches(|c| c == '{' || c == '}')
            .split(',')
            .all(|p| p.trim().eq_ignore_ascii_case("default"));
        if fast {
            ConvPrecision::Fast
        } else {
            ConvPrecision::Exact
        }
    }
}

/// A planned convolution: the routine generated code calls, and the plan it is passed.
pub struct ConvRoutine {
    /// Address of an `unsafe extern "C" fn(plan: *const P, arena: *mut u8) -> Status`.
    pub routine: usize,
    /// The routine's plan `P`, kept alive as long as the program.
    pub plan: Box<dyn Any + Send + Sync>,
    algorithm: &'static str,
    tile: Option<usize>,
}

impl ConvRoutine {
    fn new<P: Any + Send + Sync>(
        routine: usize,
        plan: P,
        algorithm: &'static str,
        tile: Option<usize>,
    ) -> ConvRoutine {
        ConvRoutine {
            routine,
            plan: Box::new(plan),
            algorithm,
            tile,
        }
    }

    fn of_operands<R: OperandRoutine>(plan: OperandPlan<R>) -> ConvRoutine {
        let routine = operand_routine::<R> as *const () as usize;
        let tile = plan.routine.tile();
        ConvRoutine::new(routine, plan, R::ALGORITHM, tile)
    }
}

impl ConvRoutine {
    /// Asks the chosen routine to add `bias` (the output-feature vector of a bias add that
    /// only reads this convolution, `bias_match.rs`) in its stores; true when it will. The
    /// direct and the Winograd forward routines can (their output is NHWC, the feature
    /// dimension contiguous); the others decline, and the add stays a kernel of its own.
    pub(crate) fn take_bias(&mut self, bias: Addr) -> bool {
        if let Some(p) = self.plan.downcast_mut::<DirectConvPlan>() {
            p.epilogue.bias = Some(bias);
        } else if let Some(p) = self.plan.downcast_mut::<WinogradPlan>() {
            p.epilogue.bias = Some(bias);
        } else {
            return false;
        }
        true
    }

    /// Asks the chosen routine to compute the forward max-pool `pool` of its result into
    /// `to` in its epilogue (`pool_fold.rs`), and to add `bias` in its stores first when
    /// given (the pool fusion's own bias add); true when it will do both. The direct and the
    /// Winograd forward routines can, where each pool window lies inside one block they
    /// write; the others decline (taking nothing), and the pool stays as it was.
    pub(crate) fn take_pool(&mut self, pool: MaxPool, to: PoolTargets, bias: Option<Addr>) -> bool {
        let epilogue = PoolEpilogue {
            pool,
            output: std::ptr::null_mut(),
            choices: std::ptr::null_mut(),
            discard_output: false,
        };
        if let Some(p) = self.plan.downcast_mut::<DirectConvPlan>() {
            p.take_pool(epilogue, to, bias)
        } else if let Some(p) = self.plan.downcast_mut::<WinogradPlan>() {
            p.take_pool(epilogue, to, bias)
        } else {
            false
        }
    }

    /// The output tile `m` of F(m x m, r x r) when a Winograd routine was chosen (for tests
    /// and reports).
    pub fn winograd_tile(&self) -> Option<usize> {
        self.tile
    }

    /// Which algorithm was chosen: `direct`, `direct-weight-grad`, `winograd`,
    /// `winograd-filter`, `phase`, `winograd-1d`, `winograd-1d-filter`, `strided-weight-grad` or
    /// `gemm` (for tests and reports).
    pub fn algorithm(&self) -> &'static str {
        self.algorithm
    }
}

/// Plans convolution `name` (`input * kernel -> output`), allocating any scratch space it
/// needs with `alloc`.
///
/// Under [`ConvAlgorithm::Auto`] the specialized routines are tried in order: the direct loops
/// for few input channels (at most `tessel_kernels::conv_direct::MAX_CHANNELS`, where Winograd's transforms
/// cost more than they save), the split by output phase for a stride-dilated input (a strided
/// convolution's data gradient, summed directly like the patch GEMM but without the holes),
/// then, at [`ConvPrecision::Fast`], Winograd for stride-1 3x3 and 5x5 windows, and 1-D
/// Winograd F(4, 5) for width-5 windows along one dimension (`Conv1D`) and its weight gradient.
#[allow(clippy::too_many_arguments)]
pub fn plan_convolution(
    name: &str,
    conv: &Convolution,
    precision: ConvPrecision,
    input: (Addr, &ArrayShape),
    kernel: (Addr, &ArrayShape),
    output: (Addr, &ArrayShape),
    options: &JitOptions,
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Result<ConvRoutine, JitError> {
    let ops = ConvOperands {
        name,
        conv,
        input,
        kernel,
        output,
    };
    let threads = options.gemm_threads;
    if options.conv_algorithm == ConvAlgorithm::Auto {
        if let Some(p) = DirectConvPlan::new(&ops, threads, alloc) {
            let routine = direct_conv_routine as *const () as usize;
            return Ok(ConvRoutine::new(routine, p, "direct", None));
        }
        let exact = plan_direct_weight_grad(&ops, threads, alloc)
            .map(ConvRoutine::of_operands)
            .or_else(|| plan_phase_conv(&ops, threads, alloc).map(ConvRoutine::of_operands))
            .or_else(|| {
                plan_strided_weight_grad(&ops, threads, alloc).map(ConvRoutine::of_operands)
            });
        if let Some(chosen) = exact {
            return Ok(chosen);
        }
    }
    if options.conv_algorithm == ConvAlgorithm::Auto && precision == ConvPrecision::Fast {
        if let Some(p) = WinogradPlan::new(&ops, threads, alloc) {
            let (routine, tile) = (winograd_routine as *const () as usize, p.tile());
            return Ok(ConvRoutine::new(routine, p, "winograd", Some(tile)));
        }
        if let Some(p) = WinogradFilterPlan::new(&ops, threads, alloc) {
            let (routine, tile) = (winograd_filter_routine as *const () as usize, p.tile());
            return Ok(ConvRoutine::new(routine, p, "winograd-filter", Some(tile)));
        }
        let backend = options.gemm;
        let fast = plan_winograd_1d(&ops, backend, threads, alloc)
            .map(ConvRoutine::of_operands)
            .or_else(|| {
                plan_winograd_1d_filter(&ops, backend, threads, alloc).map(ConvRoutine::of_operands)
            });
        if let Some(chosen) = fast {
            return Ok(chosen);
        }
    }
    let plan = ConvPlan::new(
        name,
        conv,
        input,
        kernel,
        output,
        options.gemm,
        options.gemm_threads,
        alloc,
    )?;
    let routine = conv_routine as *const () as usize;
    Ok(ConvRoutine::new(routine, plan, "gemm", None))
}
