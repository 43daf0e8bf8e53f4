//! tessel's runtime: host-side values and files, compiled executables on replicas, and the
//! session API that compiles and runs programs ([`session`]).

pub mod arena;
pub mod durable;
pub mod feed;
pub mod host_io;
pub mod jit;
pub mod memory;
pub mod replicas;
pub mod session;
pub mod shard_map;
mod stop_message;
pub mod threads;
pub mod trace;
