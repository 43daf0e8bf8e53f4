//! The `tessel` command line, run as a process: `compile`, `grad`, and `run` on the JIT on one
//! and on N replicas. One test binary, so that the crates are linked once for all verbs.

mod common;
mod compile;
mod data;
mod grad;
mod jit_replicas;
mod jit_run;
mod keras;
mod keras_escape_hatch;
mod keras_tfrecord;
mod launcher_warning;
mod limits;
mod predict;
