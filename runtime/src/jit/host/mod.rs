//! Rust code that generated code calls while a program runs: the routine ABI
//! (`routine_abi.rs`: status, error message, buffer addresses), infeed and outfeed
//! (`infeed_outfeed.rs`), collectives (`collectives.rs`), gather and scatter
//! (`gather_scatter.rs`), top-k (`topk.rs`) and the profile counters (`profile.rs`).

pub mod collectives;
pub mod gather_scatter;
pub mod infeed_outfeed;
pub mod profile;
pub mod routine_abi;
pub mod sort;
pub mod topk;

pub use routine_abi::{guarded, permute_copy, resolve, set_error, take_last_error, Status};
