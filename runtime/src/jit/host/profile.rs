//! Per-kernel time profile of a compiled program (`JitOptions::profile`, `tessel run --profile`),
//! the JIT's counterpart of XLA's `--xla_hlo_profile`.
//!
//! When profiling is on, the program calls [`tessel_profile_mark`] once at its start and once
//! after every kernel or routine call. Each mark charges the time since the previous mark on
//! the same thread to the step that just finished, so a slot's time includes the in-line
//! buffer copies the program made just before that step. A mark costs one clock read (about
//! 20 ns), so the profile barely changes the time it measures.
//!
//! Compiled with a trace recorder (`JitOptions::trace`), a mark also appends the step as an
//! event (start, duration) to the calling replica's trace buffer while recording is on
//! (`crate::trace`).

use crate::trace::{now_nanos, Trace, TraceOptions, TraceRecorder};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The slot number that only restarts the thread's clock (the program's first mark).
pub(crate) const RESTART: u64 = u64::MAX;
/// The slot number of the program's last mark: traced as the whole run, counted nowhere.
pub(crate) const PROGRAM_END: u64 = u64::MAX - 1;

/// One profiled step of the program: a kernel function or a Rust routine.
#[derive(Debug)]
pub(crate) struct ProfileSlot {
    /// The kernel's symbol (`k12_fusion_3`) or the instruction a routine computes.
    pub name: String,
    /// What it is: `kernel` or the routine's opcode (`dot`, `convolution`, ...).
    pub kind: String,
    nanos: AtomicU64,
    calls: AtomicU64,
}

/// The counters of one executable; the generated code holds its address.
#[derive(Debug, Default)]
pub struct ProfileCounters {
    slots: Vec<ProfileSlot>,
    /// The trace buffers, when the program was compiled to record traces.
    trace: Option<Arc<TraceRecorder>>,
}

/// What one slot measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotTime {
    pub name: String,
    pub kind: String,
    pub calls: u64,
    pub total_ms: f64,
}

impl ProfileCounters {
    /// Counters that also keep trace buffers for `replicas` replicas.
    pub fn with_trace(replicas: usize, options: TraceOptions) -> ProfileCounters {
        ProfileCounters {
            slots: Vec::new(),
            trace: Some(Arc::new(TraceRecorder::new(replicas, options))),
        }
    }

    /// The trace recorder, when compiled with one: start and stop recording there.
    pub fn recorder(&self) -> Option<&Arc<TraceRecorder>> {
        self.trace.as_ref()
    }

    /// The events recorded since recording started, named by their slots (the buffers are
    /// empty afterwards); `None` without a recorder.
    pub fn take_trace(&self) -> Option<Trace> {
        let raw = self.trace.as_ref()?.take_raw();
        Some(Trace::from_raw(raw, |i| {
            self.slots
                .get(i)
                .map(|s| (s.name.as_str(), s.kind.as_str()))
        }))
    }

    /// Adds a slot while compiling; returns its number.
    pub(crate) fn add_slot(&mut self, name: &str, kind: &str) -> u64 {
        self.slots.push(ProfileSlot {
            name: name.to_string(),
            kind: kind.to_string(),
            nanos: AtomicU64::new(0),
            calls: AtomicU64::new(0),
        });
        (self.slots.len() - 1) as u64
    }

    /// Zeroes every counter (e.g. after a warm-up run).
    pub fn reset(&self) {
        for s in &self.slots {
            s.nanos.store(0, Ordering::Relaxed);
            s.calls.store(0, Ordering::Relaxed);
        }
    }

    /// Every slot's totals, most expensive first.
    pub fn times(&self) -> Vec<SlotTime> {
        let mut v: Vec<SlotTime> = self
            .slots
            .iter()
            .map(|s| SlotTime {
                name: s.name.clone(),
                kind: s.kind.clone(),
                calls: s.calls.load(Ordering::Relaxed),
                total_ms: s.nanos.load(Ordering::Relaxed) as f64 / 1e6,
            })
            .collect();
        v.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
        v
    }
}

/// Rows of [`render`]'s table; the cheaper rest is summed in one line.
pub const SHOWN: usize = 30;

/// Renders a profile as a table: per-run milliseconds and share of the total, per slot, the
/// most expensive first; the [`SHOWN`] most expensive rows, the rest summed in one line.
pub fn render(times: &[SlotTime], runs: u64) -> String {
    render_rows(times, runs, SHOWN)
}

/// [`render`] with `rows` rows before the summed rest (`usize::MAX`: every kernel called).
pub fn render_rows(times: &[SlotTime], runs: u64, rows: usize) -> String {
    let runs = runs.max(1) as f64;
    let total: f64 = times.iter().map(|t| t.total_ms).sum::<f64>() / runs;
    let mut out = format!(
        "{:>9} {:>6} {:>6}  {:<12} {}\n",
        "ms/run", "%", "calls", "kind", "kernel"
    );
    let called: Vec<&SlotTime> = times.iter().filter(|t| t.calls > 0).collect();
    for t in called.iter().take(rows) {
        let ms = t.total_ms / runs;
        let share = if total > 0.0 { 100.0 * ms / total } else { 0.0 };
        out.push_str(&format!(
            "{ms:>9.3} {share:>5.1}% {:>6}  {:<12} {}\n",
            (t.calls as f64 / runs).round() as u64,
            t.kind,
            t.name
        ));
    }
    if called.len() > rows {
        let rest = &called[rows..];
        let ms = rest.iter().map(|t| t.total_ms).sum::<f64>() / runs;
        let share = if total > 0.0 { 100.0 * ms / total } else { 0.0 };
        out.push_str(&format!(
            "{ms:>9.3} {share:>5.1}%          {} more kernels and routines\n",
            rest.len()
        ));
    }
    out.push_str(&format!("{total:>9.3} 100.0%          total\n"));
    out
}

thread_local! {
    static LAST_MARK: Cell<u64> = const { Cell::new(0) };
    /// When the program running on this thread made its first mark.
    static PROGRAM_START: Cell<u64> = const { Cell::new(0) };
}

/// Called by generated code: charges the time since this thread's last mark to `slot`.
///
/// # Safety
/// `counters` must point to the live [`ProfileCounters`] the program was compiled with.
pub(crate) unsafe extern "C" fn tessel_profile_mark(counters: *const ProfileCounters, slot: u64) {
    let now = now_nanos();
    let last = LAST_MARK.with(|l| l.replace(now));
    let counters = &*counters;
    if slot >= PROGRAM_END {
        if slot == RESTART {
            PROGRAM_START.with(|s| s.set(now));
        } else if let Some(trace) = &counters.trace {
            trace.record_program(PROGRAM_START.with(|s| s.get()), now);
        }
        return;
    }
    if let Some(s) = counters.slots.get(slot as usize) {
        s.nanos
            .fetch_add(now.saturating_sub(last), Ordering::Relaxed);
        s.calls.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(trace) = &counters.trace {
        trace.record_slot(slot, last, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_charge_the_time_since_the_previous_mark() {
        let mut c = ProfileCounters::default();
        let a = c.add_slot("k0_sleep", "kernel");
        let b = c.add_slot("dot.1", "dot");
        unsafe {
            tessel_profile_mark(&c, RESTART);
            std::thread::sleep(std::time::Duration::from_millis(20));
            tessel_profile_mark(&c, a);
            tessel_profile_mark(&c, b);
        }
        let t = c.times();
        assert_eq!(t[0].name, "k0_sleep");
        assert!(t[0].total_ms >= 19.0, "{t:?}");
        assert_eq!(t[1].calls, 1);
        assert!(t[1].total_ms < 5.0, "{t:?}");
        let table = render(&t, 1);
        assert!(
            table.contains("k0_sleep") && table.contains("total"),
            "{table}"
        );
        // One row, then the rest summed; or every kernel.
        let one = render_rows(&t, 1, 1);
        assert!(one.contains("k0_sleep") && !one.contains("dot.1"), "{one}");
        assert!(one.contains("1 more kernels and routines"), "{one}");
        let all = render_rows(&t, 1, usize::MAX);
        assert!(
            all.contains("dot.1") && !all.contains("more kernels"),
            "{all}"
        );
        c.reset();
        assert!(c.times().iter().all(|s| s.calls == 0));
    }

    #[test]
    fn with_a_recorder_marks_become_events_of_the_calling_replica_while_recording() {
        let mut c = ProfileCounters::with_trace(
            2,
            TraceOptions {
                events_per_track: 2,
            },
        );
        let a = c.add_slot("k0_add", "kernel");
        let b = c.add_slot("dot.1", "dot");
        let recorder = c.recorder().unwrap().clone();
        unsafe {
            // Not recording: counted, not traced.
            tessel_profile_mark(&c, RESTART);
            tessel_profile_mark(&c, a);
            recorder.start();
            tessel_profile_mark(&c, RESTART);
            std::thread::sleep(std::time::Duration::from_millis(2));
            tessel_profile_mark(&c, a);
            tessel_profile_mark(&c, PROGRAM_END);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _replica = crate::trace::enter_replica(1);
                    tessel_profile_mark(&c, RESTART);
                    tessel_profile_mark(&c, b);
                    // The buffer holds 2: these are dropped and counted.
                    tessel_profile_mark(&c, b);
                    tessel_profile_mark(&c, b);
                });
            });
            recorder.stop();
            tessel_profile_mark(&c, b);
        }
        let trace = c.take_trace().unwrap();
        assert_eq!(trace.dropped, 1);
        // The whole run first (it starts with its first kernel and lasts longer), then the
        // kernel nested in it.
        let r0 = &trace.track("replica 0").unwrap().events;
        assert_eq!(r0.len(), 2, "{r0:?}");
        assert_eq!(
            (r0[0].name.as_str(), r0[0].category.as_str()),
            ("program run", "program")
        );
        assert_eq!(
            (r0[1].name.as_str(), r0[1].category.as_str()),
            ("k0_add", "kernel")
        );
        assert_eq!(r0[0].start_ns, r0[1].start_ns);
        assert!(r0[0].duration_ns >= r0[1].duration_ns, "{r0:?}");
        assert!(r0[1].duration_ns >= 2_000_000, "{r0:?}");
        assert!(r0[0].start_ns >= trace.origin_ns);
        assert_eq!(trace.kernels("replica 0").count(), 1);
        let r1 = &trace.track("replica 1").unwrap().events;
        assert_eq!(r1.len(), 2);
        assert!(r1.iter().all(|e| e.name == "dot.1" && e.category == "dot"));
        // The counters saw every call, recorded or not.
        let calls: u64 = c.times().iter().map(|t| t.calls).sum();
        assert_eq!(calls, 6);
        // Taken: the buffers are empty.
        assert!(c.take_trace().unwrap().events().next().is_none());
        assert!(ProfileCounters::default().take_trace().is_none());
    }
}
