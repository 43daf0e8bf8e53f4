//! A compiled program: owns its JIT code (freed on drop), its constants, its routine plans
//! and its buffer arena; [`Executable::run`] marshals literals in and out.

use crate::arena::Arena;
use crate::jit::buffer::{Addr, Buffer, ConstPool, Loc};
use crate::jit::host::take_last_error;
use crate::jit::profile::ProfileCounters;
use crate::jit::JitError;
use cranelift_jit::JITModule;
use std::any::Any;
use std::sync::Mutex;
use tessel_compiler::ir::{Array, ArrayData, Literal};

/// Numbers about a compiled program.
#[derive(Clone, Debug, Default)]
pub struct ProgramStats {
    pub kernels: usize,
    pub arena_bytes: usize,
    pub buffers: usize,
    pub constant_bytes: usize,
    pub compile_ms: f64,
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
    arena: Mutex<Arena>,
    params: Vec<Loc>,
    result: Loc,
    // Compiled code refers to these by address: they live as long as the code.
    _consts: ConstPool,
    _plans: Vec<Box<dyn Any + Send + Sync>>,
    // The code writes these counters (when compiled with profiling).
    profile: Option<Box<ProfileCounters>>,
    stats: ProgramStats,
}

// The JIT code, constants and plans are immutable once built; the arena is behind a mutex.
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
            arena: Mutex::new(Arena::new(p.arena_size)),
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

    /// Runs the program on `args` (one literal per entry parameter).
    pub fn run(&self, args: &[Literal]) -> Result<Literal, JitError> {
        if args.len() != self.params.len() {
            return Err(JitError::Arguments(format!(
                "expected {} arguments, got {}",
                self.params.len(),
                args.len()
            )));
        }
        let mut arena = self.arena.lock().unwrap_or_else(|p| p.into_inner());
        for (i, (arg, loc)) in args.iter().zip(&self.params).enumerate() {
            write_arg(&mut arena, loc, arg)
                .map_err(|m| JitError::Arguments(format!("argument {i}: {m}")))?;
        }
        let base = arena.base();
        let status = unsafe { (self.entry)(base) };
        if status != 0 {
            let msg = take_last_error().unwrap_or_else(|| format!("status {status}"));
            return Err(JitError::Runtime(msg));
        }
        read_loc(&arena, &self.result)
    }
}

fn write_arg(arena: &mut Arena, loc: &Loc, lit: &Literal) -> Result<(), String> {
    match (loc, lit) {
        (Loc::Array(b), Literal::Array(a)) => {
            if a.shape.element_type != b.shape.element_type || a.shape.dims != b.shape.dims {
                return Err(format!("expected {}, got {}", b.shape, a.shape));
            }
            let Addr::Arena(off) = b.addr else {
                return Err("parameter buffer outside the arena".into());
            };
            let bytes = a.data.to_le_bytes();
            arena.bytes_mut(off, bytes.len()).copy_from_slice(&bytes);
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
            // Nothing runs any more: the arena lock is free and no code pointer escapes.
            unsafe { jit.free_memory() };
        }
    }
}
