//! tessel's runtime: host-side values and files, and compiled executables.

pub mod arena;
pub mod executable;
pub mod jit;
