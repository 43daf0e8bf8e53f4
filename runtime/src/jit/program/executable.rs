//! A compiled program: owns its JIT code (freed on drop), its constants, its routine plans
//! and a pool of buffer arenas; [`Executable::run`] marshals literals in and out, and
//! [`Executable::run_replicated`] runs the program on N replicas at once, one thread and one
//! arena each, sharing the code, constants and plans.

use crate::arena::Arena;
use crate::feed::{AbortFeedOnDrop, HostFeed};
use crate::jit::buffer::{Addr, Buffer, ConstPool, Loc};
use crate::jit::host::infeed_outfeed::with_host_feed;
use crate::jit::host::profile::ProfileCounters;
use crate::jit::host::take_last_error;
use crate::jit::JitError;
use crate::replicas::{
    self, first_failure, stopped_message, Fault, PoisonOnDrop, ReplicaBackend, ReplicaContext,
    ReplicaError, ReplicaOptions, Residency,
};
use cranelift_jit::JITModule;
use std::any::Any;
use std::sync::Mutex;
use tessel_compiler::ir::{Array, ArrayData, Literal};

/// Numbers about a compiled program.
#[derive(Clone, Debug, Default)]
pub struct ProgramStats {
    pub kernels: usize,
    /// Forward max-pool fusions a convolution computes in its epilogue (`conv_pool.rs`).
    pub folded_pools: usize,
    /// Max-pool gradients that read the window choices their forward pool recorded instead
    /// of the pre-activation (`routines/pool_choices.rs`).
    pub pool_choices: usize,
    /// Convolution outputs that only their folded pool reads, which the routine may leave
    /// unstored (`PoolEpilogue::discard_output`).
    pub discarded_outputs: usize,
    /// Convolution pairs run side by side, one per core (`routines/conv_pair.rs`).
    pub paired_convolutions: usize,
    /// Kernels run in chunks of their outermost loop on several threads
    /// (`program/emit_kernels.rs`).
    pub chunked_kernels: usize,
    pub arena_bytes: usize,
    pub buffers: usize,
    pub constant_bytes: usize,
    pub compile_ms: f64,
    /// Scratch space the program's instructions asked for (instruction name, bytes), in
    /// the order asked (compared with the buffer assignment's plan, `jit/arena_plan.rs`).
    pub scratch: Vec<(String, usize)>,
    /// The arena offsets of every value the program placed (array leaves with bytes), by
    /// instruction instance: each is the buffer assignment's (`jit/arena_plan.rs`).
    pub placements: Vec<(
        (
            tessel_compiler::passes::Instance,
            tessel_compiler::ir::InstrId,
        ),
        Vec<usize>,
    )>,
}

/// What the compiler hands over to make an [`Executable`].
pub(crate) struct ExecutableParts {
    pub jit: JITModule,
    pub entry: *const u8,
    pub arena_size: usize,
    pub params: Vec<Loc>,
    pub result: Loc,
    pub consts: ConstPool,
    pub plans: Vec<Box<dyn Any + Send + Sync>>,
    pub profile: Option<Box<ProfileCounters>>,
    pub stats: ProgramStats,
}

pub struct Executable {
    jit: Option<JITModule>,
    entry: unsafe extern "C" fn(*mut u8) -> i32,
    arena_size: usize,
    /// Arenas not in use. A run takes one (or makes one) and puts it back, so concurrent runs
    /// and replicas never share an arena, and repeated runs do not allocate.
    arenas: Mutex<Vec<Arena>>,
    params: Vec<Loc>,
    result: Loc,
    /// `[i]`: the result's leaf i lives in parameter i's buffer (see [`Residency`]).
    result_in_param: Vec<bool>,
    // Compiled code refers to these by address: they live as long as the code.
    _consts: ConstPool,
    _plans: Vec<Box<dyn Any + Send + Sync>>,
    // The code writes these counters (when compiled with profiling).
    profile: Option<Box<ProfileCounters>>,
    stats: ProgramStats,
}

// The JIT code, constants and plans are immutable once built (routines only read their
// plans); every run has an arena of its own.
unsafe impl Send for Executable {}
unsafe impl Sync for Executable {}

impl Executable {
    pub(crate) fn new(p: ExecutableParts) -> Executable {
        let entry = unsafe {
            std::mem::transmute::<*const u8, unsafe extern "C" fn(*mut u8) -> i32>(p.entry)
        };
        Executable {
            jit: Some(p.jit),
            entry,
            arena_size: p.arena_size,
            // Arenas are made when a run needs one: compiling allocates no buffers.
            arenas: Mutex::new(Vec::new()),
            result_in_param: result_in_param(&p.params, &p.result),
            params: p.params,
            result: p.result,
            _consts: p.consts,
            _plans: p.plans,
            profile: p.profile,
            stats: p.stats,
        }
    }

    pub fn stats(&self) -> &ProgramStats {
        &self.stats
    }

    /// The per-kernel time counters, if compiled with `JitOptions::profile`.
    pub fn profile(&self) -> Option<&ProfileCounters> {
        self.profile.as_deref()
    }

    /// Runs the program on `args` (one literal per entry parameter), as replica 0 of one.
    pub fn run(&self, args: &[Literal]) -> Result<Literal, JitError> {
        self.run_resident(args, Residency::default())
    }

    /// [`Executable::run`] with results kept in the arena from one run to the next.
    pub fn run_resident(
        &self,
        args: &[Literal],
        residency: Residency,
    ) -> Result<Literal, JitError> {
        let mut arena = self.take_arena(0, residency.from)?;
        let out = self.run_in(&mut arena, args, 0, residency);
        self.put_back(arena);
        out
    }

    /// Runs the program on `args.len()` replicas at once; `args[r]` are replica r's
    /// arguments. Collectives meet in-process and reduce in replica-id order, so every
    /// replica's result is bitwise reproducible. If one replica fails, all stop and the
    /// error names the replica that failed first.
    pub fn run_replicated(&self, args: Vec<Vec<Literal>>) -> Result<Vec<Literal>, ReplicaError> {
        self.run_replicated_with(args, &ReplicaOptions::default())
    }

    /// [`Executable::run_replicated`] with options (fault injection for tests).
    pub fn run_replicated_with(
        &self,
        args: Vec<Vec<Literal>>,
        options: &ReplicaOptions,
    ) -> Result<Vec<Literal>, ReplicaError> {
        self.run_replicas_on(args, options, None)
    }

    /// [`Executable::run_replicated_with`] for a program with infeed and outfeed: replica r
    /// reads and writes `feed` as replica r, and a replica that fails also aborts the feed, so
    /// replicas blocked on an infeed (and the host's infeed thread) stop too.
    pub fn run_replicated_fed(
        &self,
        args: Vec<Vec<Literal>>,
        feed: &dyn HostFeed,
        options: &ReplicaOptions,
    ) -> Result<Vec<Literal>, ReplicaError> {
        self.run_replicas_on(args, options, Some(feed))
    }

    fn run_replicas_on(
        &self,
        args: Vec<Vec<Literal>>,
        options: &ReplicaOptions,
        feed: Option<&dyn HostFeed>,
    ) -> Result<Vec<Literal>, ReplicaError> {
        let n = args.len();
        if n == 0 {
            return Err(ReplicaError::new(
                None,
                "a replicated run needs at least one replica",
            ));
        }
        let (hub, first, devices) = replicas::placement::hub_for(options.placement, n)
            .map_err(|e| ReplicaError::new(None, e))?;
        let arenas: Vec<Arena> = (0..n)
            .map(|local| self.take_arena(local, options.residency.from))
            .collect::<Result<_, _>>()
            .map_err(|e| ReplicaError::new(None, e.to_string()))?;
        let outcomes: Vec<(Result<Literal, ReplicaError>, Option<Arena>)> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = args
                    .into_iter()
                    .zip(arenas)
                    .enumerate()
                    .map(|(local, (replica_args, mut arena))| {
                        let r = first + local;
                        let own_hub = hub.clone();
                        std::thread::Builder::new()
                            .name(format!("replica-{r}"))
                            .spawn_scoped(scope, move || {
                                let hub = own_hub;
                                // Poisons the hub if this thread ends without a result.
                                let guard = PoisonOnDrop::new(&hub, r);
                                let feed_guard = AbortFeedOnDrop::new(feed, local);
                                let _env = replicas::enter(
                                    ReplicaContext::new(
                                        r,
                                        devices,
                                        options.numbering,
                                        hub.clone(),
                                        None,
                                    ),
                                    options.inject,
                                );
                                // The trace buffer this thread's profile marks go to.
                                let _trace = crate::trace::enter_replica(r);
                                if let Some(i) = options.inject {
                                    if i.replica == r && i.fault == Fault::ThreadPanic {
                                        panic!("injected panic on replica {r}'s thread");
                                    }
                                }
                                let residency = options.residency;
                                let out = match feed {
                                    Some(f) => with_host_feed(f, local, || {
                                        self.run_in(&mut arena, &replica_args, local, residency)
                                    }),
                                    None => {
                                        self.run_in(&mut arena, &replica_args, local, residency)
                                    }
                                };
                                match &out {
                                    Ok(_) => {
                                        guard.disarm();
                                        feed_guard.disarm();
                                    }
                                    Err(e) => {
                                        guard.fail(&e.to_string());
                                        feed_guard.fail(&e.to_string());
                                    }
                                }
                                (out, arena)
                            })
                            .map_err(|e| {
                                // Replicas already started must not wait for this one.
                                let e = ReplicaError::new(Some(r), format!("no thread: {e}"));
                                hub.poison(stopped_message(r, &e.message));
                                e
                            })
                    })
                    .collect();
                handles
                    .into_iter()
                    .enumerate()
                    .map(|(local, h)| (first + local, h))
                    .map(|(r, h)| match h {
                        Err(e) => (Err(e), None),
                        Ok(h) => match h.join() {
                            Ok((out, arena)) => (
                                out.map_err(|e| ReplicaError::new(Some(r), e.to_string())),
                                Some(arena),
                            ),
                            // The arena of a panicked replica is dropped, not reused.
                            Err(p) => (
                                Err(ReplicaError::new(
                                    Some(r),
                                    format!("the replica's thread panicked: {}", panic_text(&p)),
                                )),
                                None,
                            ),
                        },
                    })
                    .collect()
            });
        let (results, arenas): (Vec<_>, Vec<_>) = outcomes.into_iter().unzip();
        for a in arenas.into_iter().flatten() {
            self.put_back(a);
        }
        if let Some(e) = first_failure(&results) {
            return Err(e);
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("no failure"))
            .collect())
    }

    /// An arena from the pool (the one holding the results of run `from` on replica `local`,
    /// if there is one), or a new one; an error when its memory cannot be allocated.
    fn take_arena(&self, local: usize, from: Option<u64>) -> Result<Arena, JitError> {
        let mut pool = self.arenas.lock().unwrap_or_else(|p| p.into_inner());
        let held = from.and_then(|tag| pool.iter().position(|a| a.holds == Some((tag, local))));
        let pooled = match held {
            Some(i) => Some(pool.swap_remove(i)),
            None => pool.pop(),
        };
        drop(pool);
        match pooled {
            Some(a) => Ok(a),
            None => Ok(Arena::try_new(self.arena_size)?),
        }
    }

    /// Bytes of the arena each run (each replica) needs.
    pub(crate) fn arena_size(&self) -> usize {
        self.arena_size
    }

    /// Arenas kept from earlier runs, ready for the next: memory already taken, which a check
    /// of the memory still available must not count again.
    pub(crate) fn pooled_arenas(&self) -> usize {
        self.arenas.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn put_back(&self, arena: Arena) {
        self.arenas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(arena);
    }

    /// One run of the program in `arena`, as the current thread's replica (`local`: its index
    /// among this run's replicas). Arguments the arena already holds as results of run
    /// `residency.from` are not written again (only their shapes are checked).
    fn run_in(
        &self,
        arena: &mut Arena,
        args: &[Literal],
        local: usize,
        residency: Residency,
    ) -> Result<Literal, JitError> {
        if args.len() != self.params.len() {
            return Err(JitError::Arguments(format!(
                "expected {} arguments, got {}",
                self.params.len(),
                args.len()
            )));
        }
        let resident = residency
            .from
            .is_some_and(|tag| arena.holds == Some((tag, local)));
        // From here on the arena holds this run's values, whatever happens.
        arena.holds = None;
        for (i, (arg, loc)) in args.iter().zip(&self.params).enumerate() {
            let kept = resident && self.result_in_param[i];
            let written = if kept {
                check_arg(loc, arg)
            } else {
                write_arg(arena, loc, arg)
            };
            written.map_err(|m| JitError::Arguments(format!("argument {i}: {m}")))?;
        }
        let base = arena.base();
        let status = unsafe { (self.entry)(base) };
        if status != 0 {
            let msg = take_last_error().unwrap_or_else(|| format!("status {status}"));
            return Err(JitError::Runtime(msg));
        }
        let out = read_loc(arena, &self.result)?;
        arena.holds = residency.tag.map(|tag| (tag, local));
        Ok(out)
    }
}

impl ReplicaBackend for Executable {
    fn run_replicas(&self, args: Vec<Vec<Literal>>) -> Result<Vec<Literal>, ReplicaError> {
        self.run_replicated(args)
    }
}

fn panic_text(p: &Box<dyn Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// Whether result leaf i of `result` lives in the buffer of parameter i (an array), for each
/// parameter: a loop whose state took over its donated parameters returns its final state
/// there.
fn result_in_param(params: &[Loc], result: &Loc) -> Vec<bool> {
    let leaves = result.leaves();
    params
        .iter()
        .enumerate()
        .map(|(i, p)| match (p, leaves.get(i)) {
            (Loc::Array(p), Some(r)) => {
                matches!(p.addr, Addr::Arena(_))
                    && p.addr == r.addr
                    && p.shape == r.shape
                    && p.byte_size() > 0
            }
            _ => false,
        })
        .collect()
}

/// [`write_arg`]'s check of an argument's shape, for one whose bytes the arena already holds.
fn check_arg(loc: &Loc, lit: &Literal) -> Result<(), String> {
    match (loc, lit) {
        (Loc::Array(b), Literal::Array(a)) => {
            if a.shape.element_type != b.shape.element_type || a.shape.dims != b.shape.dims {
                return Err(format!("expected {}, got {}", b.shape, a.shape));
            }
            Ok(())
        }
        _ => Err(format!("expected a value shaped like {:?}", loc_kind(loc))),
    }
}

fn write_arg(arena: &mut Arena, loc: &Loc, lit: &Literal) -> Result<(), String> {
    match (loc, lit) {
        (Loc::Array(b), Literal::Array(a)) => {
            check_arg(loc, lit)?;
            let Addr::Arena(off) = b.addr else {
                return Err("parameter buffer outside the arena".into());
            };
            write_le(arena.bytes_mut(off, b.byte_size()), &a.data);
            Ok(())
        }
        (Loc::Tuple(ls), Literal::Tuple(ts)) if ls.len() == ts.len() => ls
            .iter()
            .zip(ts)
            .try_for_each(|(l, t)| write_arg(arena, l, t)),
        (Loc::Token, Literal::Token) => Ok(()),
        _ => Err(format!("expected a value shaped like {:?}", loc_kind(loc))),
    }
}

/// Writes `data`'s elements into `dst` as little-endian bytes (`pred` as one byte 0/1, as
/// [`ArrayData::to_le_bytes`] lays them out), element by element with no temporary: a
/// training loop's carried state (an embedding table and its Adam moments, 10 MB each) is
/// written at every run.
fn write_le(dst: &mut [u8], data: &ArrayData) {
    macro_rules! le {
        ($v:expr) => {{
            let w = std::mem::size_of_val(&$v[0]);
            for (d, x) in dst.chunks_exact_mut(w).zip($v.iter()) {
                d.copy_from_slice(&x.to_le_bytes());
            }
        }};
    }
    match data {
        ArrayData::Pred(v) => dst.iter_mut().zip(v).for_each(|(d, &b)| *d = b as u8),
        ArrayData::S8(v) => dst.iter_mut().zip(v).for_each(|(d, &x)| *d = x as u8),
        ArrayData::U8(v) => dst.iter_mut().zip(v).for_each(|(d, &x)| *d = x),
        ArrayData::S16(v) if !v.is_empty() => le!(v),
        ArrayData::U16(v) if !v.is_empty() => le!(v),
        ArrayData::S32(v) if !v.is_empty() => le!(v),
        ArrayData::U32(v) if !v.is_empty() => le!(v),
        ArrayData::S64(v) if !v.is_empty() => le!(v),
        ArrayData::U64(v) if !v.is_empty() => le!(v),
        ArrayData::F16(v) if !v.is_empty() => le!(v),
        ArrayData::BF16(v) if !v.is_empty() => le!(v),
        ArrayData::F32(v) if !v.is_empty() => le!(v),
        ArrayData::F64(v) if !v.is_empty() => le!(v),
        _ => {}
    }
}

fn loc_kind(loc: &Loc) -> &'static str {
    match loc {
        Loc::Array(_) => "array",
        Loc::Tuple(_) => "tuple",
        Loc::Token => "token",
    }
}

fn read_buffer(arena: &Arena, b: &Buffer) -> Result<Array, JitError> {
    let n = b.byte_size();
    let bytes: &[u8] = match b.addr {
        Addr::Arena(off) => arena.bytes(off, n),
        Addr::Absolute(p) => unsafe { std::slice::from_raw_parts(p as *const u8, n) },
    };
    let data = ArrayData::from_le_bytes(b.shape.element_type, bytes)
        .ok_or_else(|| JitError::Runtime("result buffer has a partial element".into()))?;
    Ok(Array::new(b.shape.clone(), data))
}

fn read_loc(arena: &Arena, loc: &Loc) -> Result<Literal, JitError> {
    Ok(match loc {
        Loc::Array(b) => Literal::Array(read_buffer(arena, b)?),
        Loc::Tuple(t) => Literal::Tuple(
            t.iter()
                .map(|l| read_loc(arena, l))
                .collect::<Result<_, _>>()?,
        ),
        Loc::Token => Literal::Token,
    })
}

impl Drop for Executable {
    fn drop(&mut self) {
        if let Some(jit) = self.jit.take() {
            // Nothing runs any more (runs borrow the executable) and no code pointer escapes.
            unsafe { jit.free_memory() };
        }
    }
}
