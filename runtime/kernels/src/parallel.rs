//! Coarse-grained parallelism for the routines (convolution): a fixed number of workers,
//! each running a whole share of the work (patch gathering and a single-threaded GEMM).
//!
//! The workers run on Rayon's global pool, the same threads the `gemm` crate uses for its own
//! `Parallelism::Rayon`, so products and convolutions never put more threads on the cores than the
//! pool has.

/// Runs `work(worker)` for every worker in `0..workers`, concurrently when `workers > 1`, and
/// returns when all have finished. A panic in a worker is re-raised here.
pub fn for_each_worker(workers: usize, work: impl Fn(usize) + Sync) {
    if workers <= 1 {
        work(0);
        return;
    }
    let work = &work;
    rayon::scope(|s| {
        for w in 1..workers {
            s.spawn(move |_| work(w));
        }
        work(0);
    });
}

/// A raw pointer that may cross to the workers: each worker touches a disjoint part.
#[derive(Clone, Copy)]
pub struct Shared<T>(pub *mut T);

impl<T> Shared<T> {
    /// The pointer (a method, so that closures capture the whole `Shared`, which is `Sync`).
    pub fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: the routines that share a pointer give every worker disjoint memory to write.
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}
