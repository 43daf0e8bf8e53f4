//! Chooses how a convolution runs: a specialized routine where one fits its shape, otherwise
//! the general patch-matrix GEMM of `convolution.rs`, which handles every convolution the IR
//! can express.
//!
//! Every specialized routine checks its own preconditions and declines (returns `None`) for
//! anything else, so adding one never changes which convolutions compile.

use super::buffer::Addr;
use super::convolution::{conv_routine, ConvPlan};
use super::{JitError, JitOptions};
use std::any::Any;
use tessel_compiler::ir::{ArrayShape, Convolution};

/// Which convolution algorithms the JIT may use (`JitOptions::conv_algorithm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvAlgorithm {
    /// The fastest routine whose preconditions hold.
    #[default]
    Auto,
    /// Always the general patch-matrix GEMM (the reference for the specialized routines).
    Gemm,
}

impl std::str::FromStr for ConvAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ConvAlgorithm::Auto),
            "gemm" => Ok(ConvAlgorithm::Gemm),
            other => Err(format!(
                "unknown convolution algorithm `{other}` (expected auto or gemm)"
            )),
        }
    }
}

/// A planned convolution: the routine generated code calls, and the plan it is passed.
pub struct ConvRoutine {
    /// Address of an `unsafe extern "C" fn(plan: *const P, arena: *mut u8) -> Status`.
    pub routine: usize,
    /// The routine's plan `P`, kept alive as long as the program.
    pub plan: Box<dyn Any + Send + Sync>,
}

impl ConvRoutine {
    fn new<P: Any + Send + Sync>(routine: usize, plan: P) -> ConvRoutine {
        ConvRoutine {
            routine,
            plan: Box::new(plan),
        }
    }
}

/// Plans convolution `name` (`input * kernel -> output`), allocating any scratch space it
/// needs with `alloc`.
pub fn plan_convolution(
    name: &str,
    conv: &Convolution,
    input: (Addr, &ArrayShape),
    kernel: (Addr, &ArrayShape),
    output: (Addr, &ArrayShape),
    options: &JitOptions,
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Result<ConvRoutine, JitError> {
    if let Some(r) =
        super::conv_direct::plan_direct_conv(name, conv, input, kernel, output, options, alloc)
    {
        return Ok(r);
    }
    if let Some(r) = super::conv_direct_wgrad::plan_direct_weight_grad(
        name, conv, input, kernel, output, options, alloc,
    ) {
        return Ok(r);
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
    Ok(ConvRoutine::new(conv_routine as *const () as usize, plan))
}
