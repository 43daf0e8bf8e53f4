//! tessel's runtime: host-side values and files, and compiled executables on replicas.

pub mod arena;
pub mod executable;
pub mod feed;
pub mod host_io;
pub mod jit;
pub mod replicas;
pub mod shard_map;
pub mod threads;
pub mod training_loop;
