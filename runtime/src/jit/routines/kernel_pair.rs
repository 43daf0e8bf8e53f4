//! Parts of a generated kernel run on several workers (the kernels crate's worker split, so
//! they share its helper threads with the GEMM and convolution routines): two fixed halves (a
//! split reduce's partial sums), or chunks of its outermost loop claimed as threads become free.

use tessel_kernels::parallel::{for_each_range, for_each_worker, Shared};

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

/// Called by generated code: runs `kernel(arena, lo, hi)` over the chunks of `chunk`
/// iterations that cover `0..len` of its outermost loop, on at most `threads` threads, which
/// claim them as they become free; returns when all are done. Elementwise kernels cannot fail.
///
/// # Safety
/// `kernel` must be a kernel function of the running program taking `(arena, lo, hi)` whose
/// chunks write disjoint elements, and `arena` that program's arena.
pub(crate) unsafe extern "C" fn tessel_run_kernel_chunks(
    kernel: usize,
    arena: *mut u8,
    len: i64,
    chunk: i64,
    threads: i64,
) {
    // SAFETY: the generated code passes one of its own range kernels.
    let kernel =
        unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(*mut u8, i64, i64)>(kernel) };
    let arena = Shared(arena);
    let (len, chunk) = (len.max(0) as usize, chunk.max(1) as usize);
    for_each_range(len, chunk, threads.max(1) as usize, |lo, hi| unsafe {
        kernel(arena.get(), lo as i64, hi as i64)
    });
}
