//! tessel's hand-written CPU routines, independent of the compiler: every routine takes plain
//! geometry (dimensions as `usize`), raw pointers and a thread count.
//!
//! - [`cpu`]: what this machine's CPU has, detected once for the whole project.
//! - [`gemm`]: the choice between the `gemm` and `matrixmultiply` crates and their threading,
//!   tessel's own packed product for AVX2 machines without AVX-512, and the register-blocked
//!   small GEMM of the Winograd routines.
//! - [`patch_gemm`]: convolution as patch matrix + GEMM, for any window (the general case).
//! - [`phase_conv`]: convolution of a stride-dilated input (a strided convolution's data
//!   gradient) split by output phase into stride-1 patch GEMMs that skip the holes.
//! - [`conv_direct`]: direct convolution loops for few input channels (forward and weight
//!   gradient) over register tiles in AVX-512 / AVX2 / portable code.
//! - [`strided_weight_grad`]: the weight gradient of a strided convolution as one small GEMM
//!   per tap over the pixels it reads, without the patch GEMM's holes.
//! - [`winograd`]: Winograd F(2x2, r x r) convolution and its weight gradient.
//! - [`winograd_1d`]: Winograd F(m, 5) along one dimension, for width-5 `Conv1D` layers.
//! - [`pooling`]: NHWC max-pool forward and its fused gradient (ReLU gate, bias sum).
//! - [`threefry`]: Threefry-2x32's 20 rounds over arrays of counters (random bits).
//! - [`parallel`]: the fixed worker split the routines share.
//! - [`fma_peak`]: this machine's measured FMA peak, for the benches.
//!
//! A routine that only handles some shapes is planned from its geometry and declines
//! ([`KernelError::Declined`]) for anything else; the caller then picks another.
//! Each plan says how much scratch memory it needs ([`Scratch`]) and gets it at run time.

pub mod conv_direct;
pub mod cpu;
pub mod error;
pub mod fma_peak;
pub mod gemm;
pub mod geometry;
pub mod parallel;
pub mod patch_gemm;
pub mod phase_conv;
pub mod pooling;
pub mod prefetch;
pub mod scratch;
pub mod strided_weight_grad;
#[cfg(test)]
mod test_support;
pub mod threefry;
pub mod winograd;
pub mod winograd_1d;

pub use error::KernelError;
pub use geometry::Conv2dGeometry;
pub use scratch::Scratch;
