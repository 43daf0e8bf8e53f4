//! Coarse-grained parallelism for the routines: [`for_each_worker`] runs a fixed number of
//! shares of a routine's work (a convolution's image rows, a product's columns, a kernel's
//! halves), each once, on the calling thread and the crate's helper threads.
//!
//! Policy, and why it is not Rayon's pool (which the crate used before):
//! - **The caller works.** It runs shares itself, and only the shares it does not get to go
//!   to helpers. A caller that finds no helper free runs them all, so nothing ever waits for a
//!   helper to exist or to wake: shares may call `for_each_worker` again, and any number of
//!   threads (replicas, concurrent tests) may call at once.
//! - **Helpers spin for [`SPIN`] before they sleep.** A training step runs about forty
//!   parallel routines with serial stretches between them (the dropout mask's Threefry loop
//!   takes about half a millisecond). Rayon's idle workers sleep after a few dozen yields, tens
//!   of microseconds; waking a sleeping thread then takes an inter-processor interrupt, and on
//!   a virtual machine, whose idle vCPU the host has descheduled, that measured about 0.4 ms
//!   per step on the b128 MNIST step's first convolution alone (docs/performance.md). OpenMP
//!   runtimes and TensorFlow's Eigen pool spin for the same reason. While spinning, a helper
//!   yields its core every few microseconds, so a runnable thread (the host's infeed, the
//!   input pipeline) is not kept off it.
//! - **Helpers start on first use**, as many as the widest split yet asked for minus one (the
//!   caller), and live as long as the process.
//! - **Results do not depend on who runs a share**: a share is an index, so the routines'
//!   bitwise guarantees across thread counts are theirs to keep, as before.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long an idle helper keeps looking for work before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_millis(2);

/// Spin iterations between two yields of the core.
const SPINS_PER_YIELD: u32 = 64;

/// Runs `work(worker)` for every worker in `0..workers`, concurrently when `workers > 1`, and
/// returns when all have finished. A panic in a worker is re-raised here.
pub fn for_each_worker(workers: usize, work: impl Fn(usize) + Sync) {
    if workers <= 1 {
        work(0);
        return;
    }
    for_each_share(workers, workers, work)
}

/// Runs `work(share)` for every share in `0..shares`, on at most `threads` threads at once
/// (the caller and `threads - 1` helpers; one after the other on the caller when `threads` is
/// 1), and returns when all have finished. A routine whose result depends on how its work
/// is cut (partial sums) cuts it into a fixed number of shares this way, so that the result
/// is the same for any thread count. A panic in a share is re-raised here.
pub(crate) fn for_each_share(shares: usize, threads: usize, work: impl Fn(usize) + Sync) {
    if threads <= 1 || shares <= 1 {
        (0..shares).for_each(work);
        return;
    }
    let helpers = threads.min(shares) - 1;
    let pool = Pool::with_helpers(helpers);
    let work: &(dyn Fn(usize) + Sync) = &work;
    // SAFETY: only the lifetime is erased. Helpers reach the job only between `publish` and
    // the end of `withdraw_and_wait`, both below, while `work` is alive.
    let work: &'static (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(work) };
    let job = Job {
        work,
        shares,
        helpers,
        next: AtomicUsize::new(0),
        active: AtomicUsize::new(0),
        panic: Mutex::new(None),
        panicked: AtomicBool::new(false),
    };
    pool.publish(&job);
    job.run_shares();
    pool.withdraw_and_wait(&job);
    if job.panicked.load(Ordering::Acquire) {
        let payload = job
            .panic
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        std::panic::resume_unwind(payload.unwrap_or_else(|| Box::new("a worker panicked")));
    }
}

/// One call's shares: claimed one at a time by the caller and the helpers.
struct Job {
    work: &'static (dyn Fn(usize) + Sync),
    shares: usize,
    /// Helpers that may work on the job at once.
    helpers: usize,
    /// The next share to claim (claims past `shares` find nothing).
    next: AtomicUsize,
    /// Helpers that hold a reference to the job.
    active: AtomicUsize,
    /// The first panic's payload.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    panicked: AtomicBool,
}

impl Job {
    fn has_unclaimed(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.shares
    }

    /// Claims and runs shares until none is left.
    fn run_shares(&self) {
        loop {
            let w = self.next.fetch_add(1, Ordering::Relaxed);
            if w >= self.shares {
                return;
            }
            let run = std::panic::AssertUnwindSafe(|| (self.work)(w));
            if let Err(payload) = std::panic::catch_unwind(run) {
                let mut first = self.panic.lock().unwrap_or_else(PoisonError::into_inner);
                first.get_or_insert(payload);
                self.panicked.store(true, Ordering::Release);
            }
        }
    }
}

/// A job's address in the queue (the job lives on its caller's stack).
#[derive(Clone, Copy, PartialEq)]
struct JobRef(*const Job);

// SAFETY: a `JobRef` is dereferenced only while its job is published (see `Pool`).
unsafe impl Send for JobRef {}

/// The helpers and the jobs they may take.
struct Pool {
    /// Published jobs. A job stays here until its caller withdraws it, which the caller does
    /// before its job goes away; a helper takes a reference (`Job::active`) under this lock.
    queue: Mutex<Vec<JobRef>>,
    /// `queue.len()`, read by spinning helpers without the lock.
    published: AtomicUsize,
    helpers: Mutex<Vec<Thread>>,
    /// `helpers.len()`, read without the lock on every call.
    started: AtomicUsize,
    /// Helpers asleep or about to be.
    sleeping: AtomicUsize,
}

impl Pool {
    /// The process's pool, with at least `helpers` helper threads started.
    fn with_helpers(helpers: usize) -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        let pool = POOL.get_or_init(|| Pool {
            queue: Mutex::new(Vec::new()),
            published: AtomicUsize::new(0),
            helpers: Mutex::new(Vec::new()),
            started: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
        });
        if pool.started.load(Ordering::Acquire) >= helpers {
            return pool;
        }
        let mut started = pool.helpers.lock().unwrap_or_else(PoisonError::into_inner);
        while started.len() < helpers {
            let spawned = std::thread::Builder::new()
                .name(format!("tessel-worker-{}", started.len() + 1))
                .spawn(move || pool.help());
            match spawned {
                Ok(handle) => {
                    started.push(handle.thread().clone());
                    pool.started.store(started.len(), Ordering::Release);
                }
                // Without a new helper the caller runs more shares itself.
                Err(_) => break,
            }
        }
        pool
    }

    fn publish(&self, job: &Job) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.push(JobRef(job));
        self.published.store(queue.len(), Ordering::SeqCst);
        drop(queue);
        // Pairs with the helper's SeqCst `sleeping` increment and `published` re-check: either
        // it sees the job, or this sees it sleeping and wakes it.
        if self.sleeping.load(Ordering::SeqCst) > 0 {
            let helpers = self.helpers.lock().unwrap_or_else(PoisonError::into_inner);
            for h in helpers.iter() {
                h.unpark();
            }
        }
    }

    /// Removes `job` from the queue, then waits until no helper holds it.
    fn withdraw_and_wait(&self, job: &Job) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.retain(|&j| j != JobRef(job));
        self.published.store(queue.len(), Ordering::SeqCst);
        drop(queue);
        let mut spins = 0u32;
        while job.active.load(Ordering::Acquire) > 0 {
            spin_once(&mut spins);
        }
    }

    /// A published job with shares left, referenced (`Job::active`) for the caller to use.
    fn take(&self) -> Option<&Job> {
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.iter().find_map(|&JobRef(j)| {
            // SAFETY: a queued job is alive: its caller withdraws it (under this lock) before
            // it goes away, and then waits for `active` to drop back to zero.
            let job = unsafe { &*j };
            let room = job.active.load(Ordering::Relaxed) < job.helpers;
            (room && job.has_unclaimed()).then(|| {
                job.active.fetch_add(1, Ordering::Relaxed);
                job
            })
        })
    }

    /// A helper thread's life: run shares; spin for `SPIN` when there are none; then sleep
    /// until a caller publishes.
    fn help(&self) {
        let mut idle_since = Instant::now();
        let mut spins = 0u32;
        loop {
            if self.published.load(Ordering::SeqCst) > 0 {
                if let Some(job) = self.take() {
                    job.run_shares();
                    job.active.fetch_sub(1, Ordering::Release);
                    idle_since = Instant::now();
                    continue;
                }
            }
            if idle_since.elapsed() < SPIN {
                spin_once(&mut spins);
                continue;
            }
            self.sleeping.fetch_add(1, Ordering::SeqCst);
            if self.published.load(Ordering::SeqCst) == 0 {
                std::thread::park();
            }
            self.sleeping.fetch_sub(1, Ordering::SeqCst);
            idle_since = Instant::now();
        }
    }
}

/// One step of a busy wait that gives the core away every `SPINS_PER_YIELD` steps.
fn spin_once(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    if (*spins).is_multiple_of(SPINS_PER_YIELD) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_share_runs_exactly_once() {
        for workers in [1, 2, 3, 5] {
            let hits: Vec<AtomicU64> = (0..workers).map(|_| AtomicU64::new(0)).collect();
            for _ in 0..200 {
                for_each_worker(workers, |w| {
                    hits[w].fetch_add(1, Ordering::Relaxed);
                });
            }
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 200));
        }
    }

    #[test]
    fn shares_run_once_each_on_at_most_the_threads_asked() {
        for (shares, threads) in [(4, 1), (4, 2), (3, 2), (2, 5), (1, 2), (0, 2)] {
            let hits: Vec<AtomicU64> = (0..shares).map(|_| AtomicU64::new(0)).collect();
            let (running, most) = (AtomicU64::new(0), AtomicU64::new(0));
            for _ in 0..100 {
                for_each_share(shares, threads, |s| {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    hits[s].fetch_add(1, Ordering::Relaxed);
                    std::hint::black_box((0..2000).sum::<u64>());
                    running.fetch_sub(1, Ordering::SeqCst);
                });
            }
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 100));
            let most = most.load(Ordering::SeqCst);
            assert!(most <= threads as u64, "{most} at once, {threads} asked");
        }
    }

    #[test]
    fn concurrent_and_nested_calls_finish() {
        let total = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100 {
                        for_each_worker(2, |_| {
                            for_each_worker(3, |i| {
                                total.fetch_add(i as u64 + 1, Ordering::Relaxed);
                            })
                        });
                    }
                });
            }
        });
        // 4 threads x 100 calls x 2 shares x (1 + 2 + 3).
        assert_eq!(total.load(Ordering::Relaxed), 4 * 100 * 2 * 6);
    }

    #[test]
    fn a_panic_in_a_share_reaches_the_caller_with_its_message() {
        let caught = std::panic::catch_unwind(|| {
            for_each_worker(2, |w| {
                if w == 1 {
                    panic!("share {w} failed");
                }
            })
        })
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<String>().unwrap(), "share 1 failed");
        // The pool still works afterwards.
        let n = AtomicU64::new(0);
        for_each_worker(2, |_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }
}
