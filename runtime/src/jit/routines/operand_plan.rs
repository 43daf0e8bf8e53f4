//! The plan shared by the convolution routines that read two f32 operands, write one result
//! and use scratch of their own, with no epilogue: the direct and the strided weight
//! gradients, the split by output phase, and the 1-D Winograd forward and weight gradient.
//! Each routine's file decides whether a convolution fits it and builds the kernels crate's
//! routine; the buffers, the call from generated code and the error guard are here, once.

use crate::jit::buffer::Addr;
use crate::jit::host::{guarded, resolve, Status};
use tessel_kernels::conv_direct::DirectWeightGradient;
use tessel_kernels::phase_conv::PhaseConv;
use tessel_kernels::strided_weight_grad::StridedWeightGradient;
use tessel_kernels::winograd_1d::{Winograd1d, Winograd1dFilterGradient};

/// A kernels-crate routine of the form `run(a, b, out, scratch)`.
pub(crate) trait OperandRoutine: std::fmt::Debug + Send + Sync + 'static {
    /// The name `ConvRoutine::algorithm` reports.
    const ALGORITHM: &'static str;

    fn scratch_bytes(&self) -> usize;

    /// The output tile of a Winograd routine, `None` for the others.
    fn tile(&self) -> Option<usize> {
        None
    }

    /// # Safety
    /// The pointers must address the operands, the result and `scratch_bytes()` of scratch
    /// the routine was planned for.
    unsafe fn run(&self, a: *const f32, b: *const f32, out: *mut f32, scratch: *mut u8);
}

/// A planned routine with the arena addresses of its operands, result and scratch.
#[derive(Debug)]
pub(crate) struct OperandPlan<R> {
    name: String,
    pub(crate) routine: R,
    a: Addr,
    b: Addr,
    out: Addr,
    scratch: Addr,
}

impl<R: OperandRoutine> OperandPlan<R> {
    /// Allocates the routine's scratch with `alloc`.
    pub(crate) fn new(
        name: &str,
        routine: R,
        [a, b, out]: [Addr; 3],
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> OperandPlan<R> {
        OperandPlan {
            name: name.to_string(),
            scratch: alloc(routine.scratch_bytes()),
            routine,
            a,
            b,
            out,
        }
    }
}

/// Called by generated code: `plan` is a `*const OperandPlan<R>` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `OperandPlan<R>` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn operand_routine<R: OperandRoutine>(
    plan: *const OperandPlan<R>,
    arena: *mut u8,
) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || {
        unsafe {
            plan.routine.run(
                resolve(plan.a, arena) as *const f32,
                resolve(plan.b, arena) as *const f32,
                resolve(plan.out, arena) as *mut f32,
                resolve(plan.scratch, arena),
            )
        };
        Ok(())
    })
}

/// Implements [`OperandRoutine`] for a kernels-crate type whose `scratch_bytes` and `run`
/// have that form (`tile` given for the Winograd ones).
macro_rules! operand_routine {
    ($ty:ty, $name:literal $(, tile: $tile:ident)?) => {
        impl OperandRoutine for $ty {
            const ALGORITHM: &'static str = $name;
            fn scratch_bytes(&self) -> usize {
                <$ty>::scratch_bytes(self)
            }
            $(fn tile(&self) -> Option<usize> {
                Some(<$ty>::$tile(self))
            })?
            unsafe fn run(&self, a: *const f32, b: *const f32, out: *mut f32, scratch: *mut u8) {
                unsafe { <$ty>::run(self, a, b, out, scratch) }
            }
        }
    };
}

operand_routine!(DirectWeightGradient, "direct-weight-grad");
operand_routine!(StridedWeightGradient, "strided-weight-grad");
operand_routine!(PhaseConv, "phase");
operand_routine!(Winograd1d, "winograd-1d", tile: tile);
operand_routine!(Winograd1dFilterGradient, "winograd-1d-filter", tile: tile);
