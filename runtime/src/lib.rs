//! tessel's runtime: host-side values and files, and (later) compiled executables on replicas.

pub mod host_io;
pub mod shard_map;
pub mod feed;
pub mod threads;
pub mod training_loop;
