//! tessel's runtime: host-side values and files, compiled executables on replicas, and the
//! session API that compiles and runs programs.
//!
//! - [`session`]: the API its callers use: compile a module for a `Device` and run it once, on
//!   N replicas, or as a compiled loop fed through infeed and drained through outfeed. It
//!   re-exports what its callers need from the layers below (device options, profiles, errors).
//! - [`jit`]: the Cranelift backend that turns an optimized module into native code, with the
//!   hand-written routines of `tessel-kernels`; [`arena`]: the one buffer a program's
//!   intermediate values live in.
//! - [`replicas`]: one program on N replica threads and their rendezvous; [`shard_map`]: JAX's
//!   data-parallel form split over them; [`threads`]: the compute threads they share.
//! - [`feed`]: the host's infeed queues and outfeed channel around a compiled loop.
//! - [`memory`]: the machine's memory and the replica ceiling it sets.
//! - [`host_io`]: safetensors files to and from arrays; [`durable`]: writes that survive a
//!   crash whole or not at all.

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
