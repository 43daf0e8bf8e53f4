//! Plumbing for the Rust routines that generated code calls: resolving buffer addresses,
//! reporting errors without unwinding through JIT frames, and permuting copies.

use crate::jit::buffer::{Addr, Buffer};
use std::cell::RefCell;
use tessel_compiler::ir::{Array, ArrayData};

thread_local! {
    static LAST_ERROR: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Status a routine returns to the program: 0 means success.
pub(crate) type Status = i32;

/// Runs a routine body, turning a panic or an error into a non-zero status and a message that
/// [`take_last_error`] returns.
// Routine errors stay `String` (as do the routines' `run` functions, `HostFeed` and
// `replicas::before_collective`): they only become a generated program's status message, which
// crosses JIT frames as text and reaches the user inside `JitError::Runtime`/`SessionError::Run`.
pub(crate) fn guarded(what: &str, f: impl FnOnce() -> Result<(), String>) -> Status {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(msg)) => {
            set_error(format!("{what}: {msg}"));
            1
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            set_error(format!("{what}: {msg}"));
            1
        }
    }
}

pub(crate) fn set_error(msg: String) {
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(msg));
}

pub(crate) fn take_last_error() -> Option<String> {
    LAST_ERROR.with(|e| e.borrow_mut().take())
}

/// The address of a buffer given the arena base.
pub fn resolve(addr: Addr, arena: *mut u8) -> *mut u8 {
    match addr {
        Addr::Arena(off) => arena.wrapping_add(off),
        Addr::Absolute(p) => p as *mut u8,
    }
}

/// The array buffer `b` of the program holds (a copy, for routines that run the interpreter's
/// code on it).
///
/// # Safety
/// `b` must be a live buffer of `arena` (or absolute memory the program owns).
pub(crate) unsafe fn read_array(b: &Buffer, arena: *mut u8) -> Result<Array, String> {
    let n = b.byte_size();
    let bytes = std::slice::from_raw_parts(resolve(b.addr, arena) as *const u8, n);
    let data = ArrayData::from_le_bytes(b.shape.element_type, bytes)
        .ok_or_else(|| format!("a {} buffer of {n} bytes", b.shape))?;
    Ok(Array::new(b.shape.clone(), data))
}

/// Writes `a` into the program's buffer `out`, which must be exactly its size.
///
/// # Safety
/// `out` must be a live buffer of `arena` that nothing else reads or writes meanwhile.
pub(crate) unsafe fn write_array(a: &Array, out: &Buffer, arena: *mut u8) -> Result<(), String> {
    let bytes = a.data.to_le_bytes();
    if bytes.len() != out.byte_size() {
        return Err(format!("{} bytes for a {} buffer", bytes.len(), out.shape));
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), resolve(out.addr, arena), bytes.len());
    Ok(())
}

/// Copies a row-major array of dims `src_dims` into `dst` so that destination dimension `i`
/// is source dimension `perm[i]` (destination row-major).
///
/// # Safety
/// `src` and `dst` must hold `product(src_dims) * elem` bytes and not overlap.
pub(crate) unsafe fn permute_copy(
    src: *const u8,
    src_dims: &[usize],
    perm: &[usize],
    dst: *mut u8,
    elem: usize,
) {
    let rank = src_dims.len();
    let total: usize = src_dims.iter().product();
    if total == 0 {
        return;
    }
    let mut src_strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        src_strides[i] = src_strides[i + 1] * src_dims[i + 1];
    }
    let dst_dims: Vec<usize> = perm.iter().map(|&p| src_dims[p]).collect();
    let step: Vec<usize> = perm.iter().map(|&p| src_strides[p]).collect();
    if rank == 0 {
        std::ptr::copy_nonoverlapping(src, dst, elem);
        return;
    }
    let inner = dst_dims[rank - 1];
    let inner_step = step[rank - 1];
    let mut idx = vec![0usize; rank];
    let mut d = dst;
    let rows = total / inner.max(1);
    for _ in 0..rows {
        let mut off = 0usize;
        for k in 0..rank - 1 {
            off += idx[k] * step[k];
        }
        match elem {
            4 => {
                let s = src as *const u32;
                let dd = d as *mut u32;
                for j in 0..inner {
                    *dd.add(j) = *s.add(off + j * inner_step);
                }
            }
            _ => {
                for j in 0..inner {
                    std::ptr::copy_nonoverlapping(
                        src.add((off + j * inner_step) * elem),
                        d.add(j * elem),
                        elem,
                    );
                }
            }
        }
        d = d.add(inner * elem);
        // Advance the outer odometer.
        let mut k = rank - 1;
        while k > 0 {
            k -= 1;
            idx[k] += 1;
            if idx[k] < dst_dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}
