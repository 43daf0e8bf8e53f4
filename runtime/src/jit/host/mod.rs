//! Rust code that generated code calls while a program runs: the routine ABI
//! (`routine_abi.rs`: status, error message, buffer addresses), infeed and outfeed
//! (`infeed_outfeed.rs`), collectives (`collectives.rs`), gather and scatter
//! (`gather_scatter.rs`, whole rows in `row_gather_scatter.rs`), top-k (`topk.rs`), sort (`sort.rs`),
//! Threefry's rounds (`threefry.rs`) and the profile counters
//! (`profile.rs`). The routines that run the interpreter's code copy their operands out with
//! `routine_abi::read_array` and their results back with `write_array`.

pub mod collectives;
pub mod gather_scatter;
pub(crate) mod infeed_outfeed;
pub mod profile;
pub(crate) mod routine_abi;
pub mod row_gather_scatter;
pub mod sort;
pub(crate) mod threefry;
pub mod topk;

pub use routine_abi::resolve;
pub(crate) use routine_abi::{guarded, permute_copy, set_error, take_last_error, Status};
