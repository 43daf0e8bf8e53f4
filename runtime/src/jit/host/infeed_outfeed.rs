//! `infeed` and `outfeed` in compiled code: host routines the program calls.
//!
//! The compiled entry keeps its signature `tessel_program(arena) -> status`; the host feed is
//! reached through a thread-local that the runtime sets around the entry call
//! ([`with_host_feed`]), together with the replica the calling thread runs. The infeed routine
//! pops that replica's next value and copies it into the instruction's buffers; the outfeed
//! routine reads its operand's buffers into a literal and hands it over. A closed or aborted
//! queue, a value of the wrong shape or no feed at all is an error status: the program stops
//! with that message, it never waits for data that will not come.

use crate::feed::HostFeed;
use crate::jit::buffer::{Buffer, Loc};
use crate::jit::error::JitError;
use crate::jit::host::routine_abi::{guarded, read_array, resolve, Status};
use std::cell::Cell;
use tessel_compiler::ir::{Literal, Shape};
use tessel_compiler::with_array_data;

/// The feed and replica of the program running on this thread.
type Current = Option<(*const (dyn HostFeed + 'static), usize)>;

thread_local! {
    static CURRENT: Cell<Current> = const { Cell::new(None) };
}

/// Runs `f` with `feed` as this thread's host feed for `replica`: every infeed and outfeed a
/// compiled program executes inside `f` goes to it. The previous feed (if any) is restored
/// afterwards, also when `f` panics.
pub(crate) fn with_host_feed<R>(feed: &dyn HostFeed, replica: usize, f: impl FnOnce() -> R) -> R {
    struct Restore(Current);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let ptr: *const (dyn HostFeed + '_) = feed;
    // SAFETY: only the lifetime is erased. The pointer is reachable only while `f` runs (the
    // guard puts the previous value back before `feed`'s borrow ends).
    let ptr: *const (dyn HostFeed + 'static) = unsafe { std::mem::transmute(ptr) };
    let _restore = Restore(CURRENT.with(|c| c.replace(Some((ptr, replica)))));
    f()
}

fn current_feed<'a>() -> Result<(&'a dyn HostFeed, usize), String> {
    match CURRENT.with(|c| c.get()) {
        // SAFETY: set by `with_host_feed`, whose borrow outlives the program call we are in.
        Some((p, r)) => Ok((unsafe { &*p }, r)),
        None => Err(
            "no host feed: run the program with one (Executable::run_replicated_fed, or inside \
             tessel_runtime::jit::host::infeed_outfeed::with_host_feed)"
                .into(),
        ),
    }
}

/// What an `infeed` instruction reads: its data shape (without the token) and the buffers
/// its data goes to, depth-first.
pub(crate) struct InfeedPlan {
    name: String,
    data_shape: Shape,
    buffers: Vec<Buffer>,
}

impl InfeedPlan {
    /// `out` is the instruction's `(data, token)` location.
    pub(crate) fn new(name: &str, out: &Loc) -> Result<InfeedPlan, JitError> {
        let malformed = || JitError::Invalid(format!("{name}: infeed must give (data, token[])"));
        let Loc::Tuple(items) = out else {
            return Err(malformed());
        };
        let [data, Loc::Token] = items.as_slice() else {
            return Err(malformed());
        };
        Ok(InfeedPlan {
            name: name.to_string(),
            data_shape: loc_shape(data),
            buffers: data.leaves().into_iter().cloned().collect(),
        })
    }
}

/// What an `outfeed` instruction sends: its operand's location.
pub(crate) struct OutfeedPlan {
    name: String,
    operand: Loc,
}

impl OutfeedPlan {
    pub(crate) fn new(name: &str, operand: &Loc) -> OutfeedPlan {
        OutfeedPlan {
            name: name.to_string(),
            operand: operand.clone(),
        }
    }
}

/// The shape a location holds.
fn loc_shape(loc: &Loc) -> Shape {
    match loc {
        Loc::Array(b) => Shape::Array(b.shape.clone()),
        Loc::Tuple(t) => Shape::Tuple(t.iter().map(loc_shape).collect()),
        Loc::Token => Shape::Token,
    }
}

/// Whether `value` has exactly `shape` (element types and dimensions).
fn fits(value: &Literal, shape: &Shape) -> bool {
    match (value, shape) {
        (Literal::Array(a), Shape::Array(s)) => {
            a.shape.element_type == s.element_type && a.shape.dims == s.dims
        }
        (Literal::Tuple(items), Shape::Tuple(shapes)) => {
            items.len() == shapes.len() && items.iter().zip(shapes).all(|(v, s)| fits(v, s))
        }
        (Literal::Token, Shape::Token) => true,
        _ => false,
    }
}

/// # Safety
/// Called by compiled code with its own plan and arena.
pub(crate) unsafe extern "C" fn infeed_routine(plan: *const InfeedPlan, arena: *mut u8) -> Status {
    let plan = &*plan;
    guarded(&plan.name, || {
        let (feed, replica) = current_feed()?;
        let value = feed.infeed(replica, &plan.data_shape)?;
        if !fits(&value, &plan.data_shape) {
            return Err(format!(
                "the host fed {} to an infeed of {}",
                value.shape().to_text(false),
                plan.data_shape.to_text(false)
            ));
        }
        for (a, b) in value.leaves().into_iter().zip(&plan.buffers) {
            // The element memory as it is: the JIT runs on little-endian hosts only, where it
            // is the buffer layout (`pred` is one byte 0/1 like Rust's `bool`).
            let (src, len) = with_array_data!(&a.data, v => (
                v.as_ptr().cast::<u8>(),
                std::mem::size_of_val(v.as_slice())
            ));
            if len != b.byte_size() {
                return Err(format!("{} bytes for a {} buffer", len, b.shape));
            }
            // SAFETY: `b` is an arena buffer of this program of exactly `len` bytes, and
            // `src` holds `len` bytes of `a`'s elements.
            std::ptr::copy_nonoverlapping(src, resolve(b.addr, arena), len);
        }
        Ok(())
    })
}

/// # Safety
/// Called by compiled code with its own plan and arena.
pub(crate) unsafe extern "C" fn outfeed_routine(
    plan: *const OutfeedPlan,
    arena: *mut u8,
) -> Status {
    let plan = &*plan;
    guarded(&plan.name, || {
        let (feed, replica) = current_feed()?;
        let value = read(&plan.operand, arena)?;
        feed.outfeed(replica, value)
    })
}

/// Copies the buffers of `loc` into a literal.
///
/// # Safety
/// Every buffer of `loc` must be readable at its address.
unsafe fn read(loc: &Loc, arena: *mut u8) -> Result<Literal, String> {
    Ok(match loc {
        Loc::Array(b) => Literal::Array(read_array(b, arena)?),
        Loc::Tuple(t) => {
            Literal::Tuple(t.iter().map(|l| read(l, arena)).collect::<Result<_, _>>()?)
        }
        Loc::Token => Literal::Token,
    })
}
