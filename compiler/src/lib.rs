//! tessel's compiler: the HLO IR and everything that reads, checks, transforms and evaluates it.

pub mod autodiff;
pub mod builder;
pub mod compile;
pub mod dump;
pub mod hlo_text;
pub mod interpreter;
pub mod ir;
pub mod legality;
pub mod loop_counter;
pub mod passes;
pub mod shape_inference;
pub mod trace;
pub mod training_loop;
pub mod verifier;
