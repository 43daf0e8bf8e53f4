//! The reference interpreter on the JAX corpus: forward values and gradients against JAX's
//! own numbers.

mod autodiff_corpus;
mod corpus;
