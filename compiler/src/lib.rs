//! tessel's compiler: the HLO IR and everything that reads, checks, transforms and evaluates it.

pub mod builder;
pub mod hlo_text;
pub mod interpreter;
pub mod ir;
pub mod shape_inference;
pub mod training_loop;
pub mod verifier;
