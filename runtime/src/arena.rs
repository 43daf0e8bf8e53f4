//! One buffer arena: every intermediate value of a compiled program lives at a fixed offset
//! in a single allocation made once when the program is compiled.

/// Alignment of every buffer (a cache line; enough for any vector load).
pub const BUFFER_ALIGN: usize = 64;

/// Hands out offsets during compilation. Freed blocks are reused (best fit, split when
/// larger), so buffers whose values are dead hold the next values.
#[derive(Debug, Default)]
pub struct ArenaLayout {
    size: usize,
    buffers: usize,
    /// Size of every block handed out, by offset.
    blocks: std::collections::HashMap<usize, usize>,
    /// Free blocks: (size, offset).
    free: std::collections::BTreeSet<(usize, usize)>,
}

impl ArenaLayout {
    pub fn new() -> ArenaLayout {
        ArenaLayout::default()
    }

    /// Reserves `bytes` and returns their offset.
    pub fn alloc(&mut self, bytes: usize) -> usize {
        // Zero-sized buffers still get a distinct, valid address.
        let want = bytes.max(1).next_multiple_of(BUFFER_ALIGN);
        self.buffers += 1;
        if let Some(&(size, off)) = self.free.range((want, 0)..).next() {
            self.free.remove(&(size, off));
            if size > want {
                self.free.insert((size - want, off + want));
            }
            self.blocks.insert(off, want);
            return off;
        }
        let offset = self.size.next_multiple_of(BUFFER_ALIGN);
        self.size = offset + want;
        self.blocks.insert(offset, want);
        offset
    }

    /// Returns the block at `offset` for reuse.
    pub fn free(&mut self, offset: usize) {
        if let Some(size) = self.blocks.remove(&offset) {
            self.free.insert((size, offset));
        }
    }

    pub fn size(&self) -> usize {
        self.size.next_multiple_of(BUFFER_ALIGN)
    }

    pub fn buffer_count(&self) -> usize {
        self.buffers
    }
}

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
