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
