//! Compiled training loops (interpreter and JIT, one and four replicas) fed by infeed sources.

mod training_loop;
