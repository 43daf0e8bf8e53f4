//! Compiled training loops (interpreter and JIT, one and four replicas) fed by infeed sources.

mod shard_map_loop;
mod trace;
mod training_loop;
