//! tessel's runtime: host-side values and files, and compiled executables on replicas.

pub mod arena;
pub mod feed;
pub mod host_io;
pub mod jit;
pub mod replicas;
pub mod shard_map;
pub mod sharded_loop;
pub mod threads;
pub mod training_loop;

// The executable lives with the program that builds it (`jit/program/`); this keeps its path.
pub use jit::program::executable;
