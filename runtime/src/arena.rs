//! One buffer arena: every intermediate value of a compiled program lives at a fixed offset
//! in a single allocation made once when the program is compiled. The offsets are the
//! compiler's buffer assignment's (`jit/arena_plan.rs`).

/// Alignment of every buffer (a cache line; enough for any vector load).
pub const BUFFER_ALIGN: usize = 64;

/// The memory itself: zero-initialised, 64-byte aligned, never moved.
pub struct Arena {
    storage: Vec<AlignedBlock>,
    len: usize,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct AlignedBlock([u8; BUFFER_ALIGN]);

impl Arena {
    /// A zeroed arena of `len` bytes. Aborts the process if the memory cannot be had: use
    /// [`Arena::try_new`] where the size comes from user input.
    pub fn new(len: usize) -> Arena {
        let blocks = len.div_ceil(BUFFER_ALIGN).max(1);
        Arena {
            storage: vec![AlignedBlock([0; BUFFER_ALIGN]); blocks],
            len,
        }
    }

    /// A zeroed arena of `len` bytes, or an error saying how many bytes could not be
    /// allocated (a huge program's arena must not abort the process).
    pub fn try_new(len: usize) -> Result<Arena, String> {
        let blocks = len.div_ceil(BUFFER_ALIGN).max(1);
        let mut storage = Vec::new();
        storage.try_reserve_exact(blocks).map_err(|_| {
            format!(
                "cannot allocate the {} buffer arena",
                crate::memory::bytes_text((blocks * BUFFER_ALIGN) as u64)
            )
        })?;
        storage.resize(blocks, AlignedBlock([0; BUFFER_ALIGN]));
        Ok(Arena { storage, len })
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

    pub fn bytes_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        let all = unsafe {
            std::slice::from_raw_parts_mut(
                self.storage.as_mut_ptr() as *mut u8,
                self.storage.len() * BUFFER_ALIGN,
            )
        };
        &mut all[offset..offset + len]
    }
}
