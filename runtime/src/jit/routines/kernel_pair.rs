//! Two halves of a generated kernel run on two workers (the kernels crate's worker split, so
//! they share its helper threads with the GEMM and convolution routines).

use tessel_kernels::parallel::{for_each_worker, Shared};

/// Called by generated code: runs the two halves of a split kernel (`kernel(arena)` each) on
/// two workers and returns when both are done. Elementwise kernels cannot fail.
///
/// # Safety
/// `first` and `second` must be kernel functions of the running program that write disjoint
/// elements, and `arena` that program's arena.
pub(crate) unsafe extern "C" fn tessel_run_kernel_pair(
    first: usize,
    second: usize,
    arena: *mut u8,
) {
    let kernels = [first, second];
    let arena = Shared(arena);
    for_each_worker(2, |w| {
        // SAFETY: the generated code passes two of its own kernel functions.
        let kernel =
            unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(*mut u8)>(kernels[w]) };
        unsafe { kernel(arena.get()) }
    });
}
