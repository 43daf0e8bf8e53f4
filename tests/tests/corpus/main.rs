//! The project's own JAX corpus (`tests/corpus/jax_user_programs/`): every module of its
//! manifest on the interpreter and on the JIT, as parsed and after the optimization pipeline,
//! on the manifest's replicas, against JAX's outputs; and through autodiff where the manifest
//! lists parameters to differentiate. What fails today is listed, with the reason, in
//! `known.rs`, and must still fail there with the error it names.

mod checks;
mod known;
mod manifest;
mod runs;
mod xla_printed;
