//! One-dimensional Winograd convolution F(m, 5) for sequence models (a Keras `Conv1D` of
//! width 5, which TensorFlow writes as a 2-D convolution with a `1 x 5` window): the input
//! and output are `[batch, length, channels]` rows, and each tile of `m` outputs costs
//! `m + 4` products per input/output channel pair instead of `5 m` (F(4, 5): 8 instead of 20).
//!
//! The transforms are the 2-D routines' (`winograd::matrices`), applied along the length
//! only; the products of each transform point are one matrix product over the channels
//! ([`crate::gemm::sgemm`]). The weight gradient ([`filter_gradient`]) runs the same
//! transforms transposed.

pub mod filter_gradient;
pub mod forward;

pub use filter_gradient::Winograd1dFilterGradient;
pub use forward::{KernelStrides, Winograd1d};

#[cfg(test)]
mod tests;

/// Rows a transform combines at most (the input tile of F(4, 5)).
pub(crate) const MAX_TERMS: usize = 8;

/// The nonzero terms of one transformed row: each a coefficient and the row it scales.
pub(crate) struct Terms {
    terms: [(f32, *const f32); MAX_TERMS],
    len: usize,
}

impl Terms {
    pub(crate) fn new() -> Terms {
        Terms {
            terms: [(0.0, std::ptr::null()); MAX_TERMS],
            len: 0,
        }
    }

    /// The terms of one point's input transform for the tile whose window starts at
    /// position `start` of a sequence `seq` (`len` rows of `channels`): `bt_row[j]` times row
    /// `start + j`, for the rows inside the sequence (the others are padding, zero).
    ///
    /// # Safety
    /// `seq` must address `len * channels` floats.
    #[inline(always)]
    pub(crate) unsafe fn input_tile(
        bt_row: &[f32],
        seq: *const f32,
        len: usize,
        channels: usize,
        start: isize,
    ) -> Terms {
        let mut terms = Terms::new();
        for (j, &coef) in bt_row.iter().enumerate() {
            let pos = start + j as isize;
            if pos >= 0 && pos < len as isize {
                terms.push(coef, seq.add(pos as usize * channels));
            }
        }
        terms
    }

    /// Adds `coef * row` unless `coef` is zero.
    pub(crate) fn push(&mut self, coef: f32, row: *const f32) {
        if coef != 0.0 {
            self.terms[self.len] = (coef, row);
            self.len += 1;
        }
    }

    /// `dst = sum coef * row` over the terms in the order pushed, summed from zero with a
    /// multiply and an add per term (no fused multiply-add, so the bits are the same on
    /// every instruction set). A block of 16 columns stays in registers across the terms,
    /// where a pass per term would load and store `dst` each time.
    ///
    /// # Safety
    /// Every row must hold `dst.len()` floats.
    #[inline(always)]
    pub(crate) unsafe fn combine_into(&self, dst: &mut [f32]) {
        const BLOCK: usize = 16;
        let terms = &self.terms[..self.len];
        let mut chunks = dst.chunks_exact_mut(BLOCK);
        let mut c0 = 0;
        for out in &mut chunks {
            let mut acc = [0f32; BLOCK];
            for &(coef, row) in terms {
                let src = &*(row.add(c0) as *const [f32; BLOCK]);
                for (a, s) in acc.iter_mut().zip(src) {
                    *a += coef * *s;
                }
            }
            out.copy_from_slice(&acc);
            c0 += BLOCK;
        }
        for (i, out) in chunks.into_remainder().iter_mut().enumerate() {
            let mut acc = 0f32;
            for &(coef, row) in terms {
                acc += coef * *row.add(c0 + i);
            }
            *out = acc;
        }
    }
}
