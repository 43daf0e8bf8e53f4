//! Scratch memory of a planned routine: one block the caller provides on each call, cut into
//! regions that each start on a cache line.

/// Alignment of every region, in bytes (a cache line, and an AVX-512 vector).
pub(crate) const ALIGN: usize = 64;

/// The regions of a routine's scratch block, as byte offsets into it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scratch {
    bytes: usize,
}

impl Scratch {
    /// Reserves a region of `bytes` and returns its offset.
    pub fn region(&mut self, bytes: usize) -> usize {
        let at = self.bytes;
        self.bytes += bytes.max(1).next_multiple_of(ALIGN);
        at
    }

    /// Bytes of the whole block.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A region of a scratch block as floats.
///
/// # Safety
/// `block` must be the block of the plan that returned `offset`.
#[inline]
pub(crate) unsafe fn floats(block: *mut u8, offset: usize) -> *mut f32 {
    block.add(offset) as *mut f32
}
