//! The front end against golden files and the JAX corpus: canonical text, the parser on every
//! corpus module (round trips, damaged text), the verifier, device legality and traced models.
//! One test binary per area, so that the runtime and Cranelift are linked once for all of them.

mod fmt;
mod hlo_text_corpus;
mod legality;
mod trace;
mod verify_corpus;
