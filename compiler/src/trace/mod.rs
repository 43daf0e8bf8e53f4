//! Tracing: write a model as an ordinary Rust function over symbolic [`Tensor`]s and get an
//! HLO [`crate::ir::Module`].
//!
//! ```
//! use tessel_compiler::ir::ElementType::F32;
//! use tessel_compiler::trace::{Dim, Tracer};
//!
//! let mut t = Tracer::new("linear");
//! let x = t.parameter("x", &[Dim::Unknown, Dim::Fixed(784)], F32);
//! let w = t.parameter("w", &[784, 10], F32);
//! let b = t.parameter("b", &[10], F32);
//! let y = t.scope("dense", |_| x.matmul(&w) + &b); // op_name "dense/dot", "dense/add"
//! let module = t.finish(&[&y]).expect("traced");
//! assert_eq!(module.entry().parameters().len(), 3);
//! ```
//!
//! Each op records one or more instructions whose metadata holds the op name (name scopes
//! joined by `/`, then the HLO opcode, with composite ops such as `softmax` adding their own
//! scope) and the Rust source line that called it (`#[track_caller]`).
//!
//! Shape mistakes do not panic: the op returns a failed tensor and [`Tracer::finish`]
//! returns a [`TraceError`] listing every mistake with its source line. A model function
//! therefore never needs `?` or `unwrap` between ops, and one run shows all its errors.
//!
//! Gradients: [`Tracer::grad`] (`grad.rs`) differentiates the trace so far with
//! [`crate::autodiff::gradients`]. Other extensions that build instructions themselves use
//! [`Tracer::with_module`] and [`Tracer::tensor`].

mod bits;
mod collective;
mod dims;
mod emit;
mod error;
mod grad;
mod math;
mod nn;
mod pool;
mod reduce;
mod scopes;
mod shape;
mod tensor;
mod tracer;
mod unary;

pub use dims::{Dim, IntoDims};
pub use error::{TraceError, TraceIssue};
pub use nn::Padding;
pub use tensor::Tensor;
pub use tracer::Tracer;

#[cfg(test)]
mod tests;
