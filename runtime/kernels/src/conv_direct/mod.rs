//! Direct convolution loops for few input channels, where the patch-matrix GEMM's depth is
//! too small to pay for its packing: the forward convolution ([`forward`]) and its weight
//! gradient ([`weight_gradient`]), both over one register tile ([`tile`]) written for
//! AVX-512F ([`avx512`]), AVX2+FMA ([`avx2`]) and portable code.

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512;
pub mod forward;
pub mod tile;
pub mod weight_gradient;

pub use forward::DirectConv;
pub use weight_gradient::DirectWeightGradient;

/// Most input channels the direct routines take; beyond it the GEMM's depth is large enough.
pub const MAX_CHANNELS: usize = 4;

/// Output channels `o0..o0 + lanes` of each tile: blocks of `most`, the rest in one block.
pub(crate) fn channel_blocks(channels: usize, most: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..channels)
        .step_by(most)
        .map(move |o0| (o0, (channels - o0).min(most)))
}
