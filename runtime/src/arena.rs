//! One buffer arena: every intermediate value of a compiled program lives at a fixed offset
//! in a single allocation made once when the program is compiled. The offsets are the
//! compiler's buffer assignment's (`jit/arena_plan.rs`).

use crate::memory::MemoryError;

/// Alignment of every buffer (a cache line; enough for any vector load).
pub const BUFFER_ALIGN: usize = 64;

/// The memory itself: zero-initialised, 64-byte aligned, never moved.
pub struct Arena {
    storage: Vec<AlignedBlock>,
    len: usize,
    /// The run (its tag) and replica whose results the arena still holds, if any: the next
    /// run from those results need not write them again (`Executable`'s residency).
    pub(crate) holds: Option<(u64, usize)>,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct AlignedBlock([u8; BUFFER_ALIGN]);

impl Arena {
    /// A zeroed arena of `len` bytes, or an error saying how many bytes could not be
    /// allocated (a huge program's arena must not abort the process).
    pub fn try_new(len: usize) -> Result<Arena, MemoryError> {
        let blocks = len.div_ceil(BUFFER_ALIGN).max(1);
        let mut storage = Vec::new();
        storage
            .try_reserve_exact(blocks)
            .map_err(|_| MemoryError::Arena {
                bytes: (blocks as u64).saturating_mul(BUFFER_ALIGN as u64),
            })?;
        // Before the zeroing below first touches the pages.
        advise_huge_pages(storage.as_mut_ptr() as *mut u8, blocks * BUFFER_ALIGN);
        storage.resize(blocks, AlignedBlock([0; BUFFER_ALIGN]));
        Ok(Arena {
            storage,
            len,
            holds: None,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn base(&mut self) -> *mut u8 {
        self.storage.as_mut_ptr() as *mut u8
    }

    pub fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        let all = unsafe {
            std::slice::from_raw_parts(
                self.storage.as_ptr() as *const u8,
                self.storage.len() * BUFFER_ALIGN,
            )
        };
        &all[offset..offset + len]
    }

    pub(crate) fn bytes_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        let all = unsafe {
            std::slice::from_raw_parts_mut(
                self.storage.as_mut_ptr() as *mut u8,
                self.storage.len() * BUFFER_ALIGN,
            )
        };
        &mut all[offset..offset + len]
    }
}

/// Asks Linux to back the whole 2 MiB pages inside `[start, start + len)` with huge pages
/// (before they are first touched). Debian's kernels give huge pages only where asked
/// (`transparent_hugepage/enabled` is `madvise`), and the step's kernels stream tens of
/// megabytes through the arena: with 4 KiB pages every 4 KiB is a TLB miss. The b128 step
/// went 19.5-19.8 -> 19.0-19.2 ms alternating (Zen 4, docs/performance.md).
#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *mut u8, len: usize) {
    const HUGE: usize = 2 << 20;
    let (lo, hi) = (
        (start as usize).next_multiple_of(HUGE),
        (start as usize + len) / HUGE * HUGE,
    );
    if hi > lo {
        // SAFETY: advice on memory this arena owns; it changes no contents.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: *mut u8, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arena_too_large_to_allocate_is_a_memory_error() {
        let e = Arena::try_new(usize::MAX).err().unwrap();
        assert!(matches!(e, MemoryError::Arena { .. }), "{e:?}");
        assert!(
            e.to_string().starts_with("cannot allocate the ")
                && e.to_string().ends_with(" buffer arena"),
            "{e}"
        );
        assert_eq!(Arena::try_new(100).unwrap().len(), 100);
    }
}
