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
//!   input pipeline) is not kept off it; and when a yield takes long and the thread's
//!   involuntary context switches show that another thread ran meanwhile (the core is shared
//!   with another process), the helper sleeps at once instead of spending the core's time on
//!   spinning. A long yield alone is not enough: a virtual machine's host stops vCPUs now
//!   and then, and a helper that slept on each such pause missed most routines ([`Spin`]).
//! - **Helpers start on first use**, as many as the widest split yet asked for minus one (the
//!   caller), and live as long as the process.
//! - **More shares than threads, claimed as threads become free.** On a shared CPU another
//!   process may take a core from one of the threads for milliseconds; with one share per
//!   thread, the other thread would finish its own and wait for the descheduled one's. Cut
//!   into about [`CHUNKS_PER_THREAD`] shares per thread ([`for_each_range`]), the thread that
//!   runs takes what the descheduled one has not claimed, and the wait at the end is at most
//!   one share.
//! - **The caller spins briefly, then sleeps, while helpers finish.** When the caller has no
//!   share left to claim and a helper still runs one, it spins for [`WAIT_SPIN`] (the usual
//!   wait on a quiet machine is shorter) and then parks until the last helper wakes it, so a
//!   helper the host has descheduled is not also kept off a core by its caller's spinning.
//! - **Results do not depend on who runs a share**: a share is an index, so the routines'
//!   bitwise guarantees across thread counts are theirs to keep, as before: a share owns a
//!   fixed range of the output, or a fixed partial sum added in a fixed order.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long an idle helper keeps looking for work before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_millis(2);

/// How long a caller whose shares are all claimed spins for its helpers before it parks.
pub(crate) const WAIT_SPIN: Duration = Duration::from_micros(100);

/// Spin iterations between two yields of the core.
const SPINS_PER_YIELD: u32 = 64;

/// Shares per thread that [`chunk_len`] aims for: enough that a descheduled thread's
/// unclaimed shares go to the thread that runs, few enough that each stays large.
pub const CHUNKS_PER_THREAD: usize = 4;

/// The length of the chunks that cut `len` items into about `threads x CHUNKS_PER_THREAD`
/// chunks (one chunk on one thread), a multiple of `align`, at least `align`.
pub fn chunk_len(len: usize, threads: usize, align: usize) -> usize {
    let align = align.max(1);
    if threads <= 1 {
        return len.max(1).next_multiple_of(align);
    }
    len.div_ceil(threads * CHUNKS_PER_THREAD)
        .max(1)
        .next_multiple_of(align)
}

/// Runs `part(lo, hi)` for the consecutive ranges of `chunk` items (the last maybe shorter)
/// that cover `0..len`, each once, on at most `threads` threads, which claim the ranges one
/// at a time as they become free. The ranges depend on `len` and `chunk` only.
pub fn for_each_range(
    len: usize,
    chunk: usize,
    threads: usize,
    part: impl Fn(usize, usize) + Sync,
) {
    let chunk = chunk.max(1);
    for_each_share(len.div_ceil(chunk), threads, |c| {
        part(c * chunk, ((c + 1) * chunk).min(len))
    })
}

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
    for_each_share_on_slots(shares, threads, |_, share| work(share))
}

/// [`for_each_share`], with `work(slot, share)` also told the slot of the thread that runs
/// it: a number below `threads.min(shares)` that no two threads of the call have, for a
/// routine that gives each thread its own scratch (a patch buffer) while its shares, not its
/// threads, own the output.
pub(crate) fn for_each_share_on_slots(
    shares: usize,
    threads: usize,
    work: impl Fn(usize, usize) + Sync,
) {
    if threads <= 1 || shares <= 1 {
        (0..shares).for_each(|share| work(0, share));
        return;
    }
    let helpers = threads.min(shares) - 1;
    let pool = Pool::with_helpers(helpers);
    let work: &(dyn Fn(usize, usize) + Sync) = &work;
    // SAFETY: only the lifetime is erased. Helpers reach the job only between `publish` and
    // the end of `withdraw_and_wait`, both below, while `work` is alive.
    let work: &'static (dyn Fn(usize, usize) + Sync) = unsafe { std::mem::transmute(work) };
    let job = Job {
        work,
        caller: std::thread::current(),
        shares,
        helpers,
        next: AtomicUsize::new(0),
        active: AtomicUsize::new(0),
        joined: AtomicUsize::new(0),
        panic: Mutex::new(None),
        panicked: AtomicBool::new(false),
    };
    pool.publish(&job);
    job.run_shares(0);
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
    work: &'static (dyn Fn(usize, usize) + Sync),
    /// The calling thread, which the last helper to leave wakes (see `withdraw_and_wait`).
    caller: Thread,
    shares: usize,
    /// Helpers that may work on the job at once.
    helpers: usize,
    /// The next share to claim (claims past `shares` find nothing).
    next: AtomicUsize,
    /// Helpers that hold a reference to the job.
    active: AtomicUsize,
    /// Helpers that have joined the job: the next one's slot is this plus one (the caller's
    /// is 0). No helper joins after one has left (it leaves only when no share is left to
    /// claim), so at most `helpers` ever join.
    joined: AtomicUsize,
    /// The first panic's payload.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    panicked: AtomicBool,
}

impl Job {
    fn has_unclaimed(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.shares
    }

    /// Claims and runs shares, as the thread of `slot`, until none is left.
    fn run_shares(&self, slot: usize) {
        loop {
            let w = self.next.fetch_add(1, Ordering::Relaxed);
            if w >= self.shares {
                return;
            }
            let run = std::panic::AssertUnwindSafe(|| (self.work)(slot, w));
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
        let mut spin = Spin::new(WAIT_SPIN);
        while job.active.load(Ordering::Acquire) > 0 {
            if !spin.step() {
                // The helper that drops `active` to zero unparks this thread afterwards; an
                // unpark that comes first makes this park return at once.
                std::thread::park();
            }
        }
    }

    /// A published job with shares left, referenced (`Job::active`) for the caller to use,
    /// and the caller's slot in it.
    fn take(&self) -> Option<(&Job, usize)> {
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.iter().find_map(|&JobRef(j)| {
            // SAFETY: a queued job is alive: its caller withdraws it (under this lock) before
            // it goes away, and then waits for `active` to drop back to zero.
            let job = unsafe { &*j };
            let room = job.active.load(Ordering::Relaxed) < job.helpers;
            (room && job.has_unclaimed()).then(|| {
                job.active.fetch_add(1, Ordering::Relaxed);
                (job, job.joined.fetch_add(1, Ordering::Relaxed) + 1)
            })
        })
    }

    /// A helper thread's life: run shares; spin for `SPIN` when there are none, or until a
    /// yield shows that another thread wants the core; then sleep until a caller publishes.
    fn help(&self) {
        let mut spin = Spin::new(SPIN);
        loop {
            if self.published.load(Ordering::SeqCst) > 0 {
                if let Some((job, slot)) = self.take() {
                    job.run_shares(slot);
                    // The job may go away as soon as `active` drops: its caller is taken first.
                    let caller = job.caller.clone();
                    if job.active.fetch_sub(1, Ordering::AcqRel) == 1 {
                        caller.unpark();
                    }
                    spin = Spin::new(SPIN);
                    continue;
                }
            }
            if spin.step() {
                continue;
            }
            self.sleeping.fetch_add(1, Ordering::SeqCst);
            if self.published.load(Ordering::SeqCst) == 0 {
                std::thread::park();
            }
            self.sleeping.fetch_sub(1, Ordering::SeqCst);
            spin = Spin::new(SPIN);
        }
    }
}

/// A yield of the core that takes longer than this may have run another thread meanwhile. An
/// uncontended yield returns in about a microsecond; on a virtual machine, though, the host
/// may also stop the vCPU during one (steal), and that is no reason to stop spinning: the
/// waiter's core is not wanted by any thread of this machine. So a long yield counts as
/// contention only when the thread's involuntary context switches show that another thread
/// did run on its core ([`involuntary_switches`]). Seen on a KVM guest (AMD EPYC, `cpu family
/// 25`, `model 1`): about one yield in 1500 took over 50 us with the other core idle, and a
/// helper that slept on each of them left two-thread routines running on one thread.
const CONTENDED_YIELD: Duration = Duration::from_micros(50);

/// A busy wait of at most `limit` that gives the core away every `SPINS_PER_YIELD` steps, and
/// ends early when the core turns out to be shared: then the waiter should sleep rather than
/// spin on.
struct Spin {
    since: Instant,
    limit: Duration,
    spins: u32,
    /// The thread's involuntary context switches before its first yield of this wait.
    switches_before: Option<u64>,
    /// Whether a yield has shown that another thread runs on this core (see
    /// [`CONTENDED_YIELD`]).
    contended: bool,
}

impl Spin {
    fn new(limit: Duration) -> Spin {
        Spin {
            since: Instant::now(),
            limit,
            spins: 0,
            switches_before: None,
            contended: false,
        }
    }

    /// One more step of the wait; `false`, without a step, once the wait should end: past its
    /// limit, or on a shared core.
    fn step(&mut self) -> bool {
        if self.contended || self.since.elapsed() >= self.limit {
            return false;
        }
        self.spins = self.spins.wrapping_add(1);
        if !self.spins.is_multiple_of(SPINS_PER_YIELD) {
            std::hint::spin_loop();
            return true;
        }
        if self.spins == SPINS_PER_YIELD {
            self.switches_before = involuntary_switches();
        }
        let before = Instant::now();
        std::thread::yield_now();
        self.contended = shared_core(before.elapsed(), self.switches_before, involuntary_switches);
        true
    }
}

/// Whether a yield that took `took` shows the core shared, given the thread's involuntary
/// context switches before the wait and now (read only after a long yield: reading is a
/// system call): only if another thread ran. Without the counts, any long yield does.
fn shared_core(
    took: Duration,
    switches_before: Option<u64>,
    switches_now: impl FnOnce() -> Option<u64>,
) -> bool {
    if took <= CONTENDED_YIELD {
        return false;
    }
    match (switches_before, switches_now()) {
        (Some(before), Some(now)) => now > before,
        _ => true,
    }
}

/// How many times the calling thread has been switched out while it could still run (a
/// yield that ran another thread counts; a vCPU stopped by its host does not), where the
/// system tells.
#[cfg(target_os = "linux")]
fn involuntary_switches() -> Option<u64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the `rusage` it is given.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) } == 0;
    // SAFETY: zeroed is a valid `rusage`, and filled on success.
    ok.then(|| unsafe { usage.assume_init() }.ru_nivcsw as u64)
}

#[cfg(not(target_os = "linux"))]
fn involuntary_switches() -> Option<u64> {
    None
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
    fn ranges_cover_the_length_once_with_bounds_fixed_by_length_and_chunk() {
        for (len, chunk) in [(0, 4), (1, 4), (7, 3), (64, 16), (100, 7), (5, 0)] {
            let mut seen: Option<Vec<(usize, usize)>> = None;
            for threads in [1, 2, 3] {
                let hits: Vec<AtomicU64> = (0..len).map(|_| AtomicU64::new(0)).collect();
                let ranges = Mutex::new(Vec::new());
                for_each_range(len, chunk, threads, |lo, hi| {
                    assert!(lo < hi && hi <= len, "{lo}..{hi} of {len}");
                    (lo..hi).for_each(|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    });
                    ranges.lock().unwrap().push((lo, hi));
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
                let mut ranges = ranges.into_inner().unwrap();
                ranges.sort();
                assert_eq!(seen.get_or_insert_with(|| ranges.clone()), &ranges);
            }
        }
    }

    #[test]
    fn chunks_are_aligned_and_several_per_thread() {
        assert_eq!(chunk_len(1024, 1, 16), 1024);
        assert_eq!(chunk_len(1024, 2, 16), 128);
        assert_eq!(chunk_len(1000, 2, 16), 128);
        assert_eq!(chunk_len(10, 2, 16), 16);
        assert_eq!(chunk_len(0, 2, 1), 1);
        for threads in 2..5 {
            let len = 4096usize;
            let chunks = len.div_ceil(chunk_len(len, threads, 1));
            assert_eq!(chunks, threads * CHUNKS_PER_THREAD);
        }
    }

    /// One thread stalls in the first share it claims until every other share is done (as a
    /// thread the host has descheduled would): the other thread must take all of them.
    #[test]
    fn a_stalled_threads_unclaimed_shares_are_taken_by_the_other() {
        let shares = 2 * CHUNKS_PER_THREAD;
        let done = AtomicU64::new(0);
        let first = AtomicBool::new(true);
        let timed_out = AtomicBool::new(false);
        let ran_on: Mutex<Vec<std::thread::ThreadId>> = Mutex::new(Vec::new());
        for_each_range(shares, 1, 2, |_, _| {
            if first.swap(false, Ordering::SeqCst) {
                let since = Instant::now();
                while done.load(Ordering::SeqCst) < shares as u64 - 1 {
                    if since.elapsed() > Duration::from_secs(20) {
                        timed_out.store(true, Ordering::SeqCst);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            } else {
                ran_on.lock().unwrap().push(std::thread::current().id());
            }
            done.fetch_add(1, Ordering::SeqCst);
        });
        assert!(
            !timed_out.load(Ordering::SeqCst),
            "the stalled thread's shares waited"
        );
        let ran_on = ran_on.into_inner().unwrap();
        assert_eq!(ran_on.len(), shares - 1);
        assert!(
            ran_on.iter().all(|&t| t == ran_on[0]),
            "one thread ran the rest"
        );
    }

    /// This thread's CPU time (user + system) in clock ticks, from `/proc`.
    #[cfg(target_os = "linux")]
    fn thread_cpu_ticks() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // Fields after the command's closing parenthesis; utime and stime are 14th and 15th.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    /// The caller waits 300 ms for a helper's share: it must sleep, not spin (a spinning
    /// caller would use about 300 ms of CPU, 30 ticks at the usual 100 per second).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_caller_waiting_for_a_helper_sleeps() {
        let caller = std::thread::current().id();
        let helper_started = AtomicBool::new(false);
        let before = thread_cpu_ticks();
        for_each_share(2, 2, |_| {
            if std::thread::current().id() != caller {
                helper_started.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(300));
            } else {
                // Hold the caller's share until the helper has the other one.
                while !helper_started.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        let used = thread_cpu_ticks() - before;
        assert!(
            used <= 10,
            "the caller used {used} ticks of CPU while it waited"
        );
    }

    #[test]
    fn a_long_yield_without_a_switch_is_the_hosts_not_contention() {
        let long = CONTENDED_YIELD * 4;
        // The host stopped the vCPU: no other thread of this machine ran.
        assert!(!shared_core(long, Some(7), || Some(7)));
        assert!(shared_core(long, Some(7), || Some(8)));
        assert!(!shared_core(CONTENDED_YIELD / 2, Some(7), || Some(9)));
        // Where the system does not count switches, a long yield is contention.
        assert!(shared_core(long, None, || None));
    }

    /// Pins the calling thread to one CPU.
    #[cfg(target_os = "linux")]
    fn pin_to(cpu: usize) {
        // SAFETY: a zeroed `cpu_set_t` is empty; the set is passed by pointer with its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            assert_eq!(rc, 0, "sched_setaffinity");
        }
    }

    /// A thread that spins on a core another runnable thread shares sees contention: its
    /// yields run the other thread, which shows in its involuntary context switches.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_wait_on_a_shared_core_sees_contention() {
        let cpu = {
            // SAFETY: `sched_getcpu` has no preconditions.
            let c = unsafe { libc::sched_getcpu() };
            usize::try_from(c).unwrap_or(0)
        };
        let stop = AtomicBool::new(false);
        let contended = std::thread::scope(|s| {
            s.spawn(|| {
                pin_to(cpu);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            pin_to(cpu);
            let mut spin = Spin::new(Duration::from_secs(10));
            while spin.step() {}
            stop.store(true, Ordering::Relaxed);
            spin.contended
        });
        assert!(contended, "10 s of yields to a busy thread went unnoticed");
    }

    #[test]
    fn slots_are_below_the_threads_and_never_shared_at_once() {
        for (shares, threads) in [(16, 2), (16, 3), (3, 5), (8, 1)] {
            let busy: Vec<AtomicBool> = (0..threads).map(|_| AtomicBool::new(false)).collect();
            let hits: Vec<AtomicU64> = (0..shares).map(|_| AtomicU64::new(0)).collect();
            for _ in 0..50 {
                for_each_share_on_slots(shares, threads, |slot, share| {
                    assert!(slot < threads.min(shares), "slot {slot} of {threads}");
                    assert!(
                        !busy[slot].swap(true, Ordering::SeqCst),
                        "slot {slot} twice"
                    );
                    std::hint::black_box((0..5000).sum::<u64>());
                    hits[share].fetch_add(1, Ordering::Relaxed);
                    busy[slot].store(false, Ordering::SeqCst);
                });
            }
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 50));
        }
    }

    #[test]
    fn a_panic_in_one_of_many_ranges_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            for_each_range(64, 4, 2, |lo, _| {
                std::hint::black_box((0..20_000).sum::<u64>());
                if lo == 36 {
                    panic!("range at {lo} failed");
                }
            })
        })
        .unwrap_err();
        assert_eq!(
            caught.downcast_ref::<String>().unwrap(),
            "range at 36 failed"
        );
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
