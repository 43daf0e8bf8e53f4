//! [`JitOptions`]: what [`super::compile`] may do (optimizer level, vectorizing, GEMM library
//! and threads, profiling, convolution routines, bias and pool folding, convolution pairs, CLIF
//! dumps).

use crate::trace::TraceOptions;
use std::path::PathBuf;
use tessel_kernels::gemm::GemmBackend;

/// Options of [`super::compile`].
#[derive(Clone, Debug)]
pub struct JitOptions {
    /// Write each kernel's CLIF before and after Cranelift's optimizer into this directory.
    /// Two compiles of one module write byte-identical files.
    pub dump_to: Option<PathBuf>,
    /// Cranelift's `opt_level`: `none`, `speed` or `speed_and_size`.
    pub opt_level: String,
    /// Use 4-lane vector loops where the kernel allows.
    pub vectorize: bool,
    /// Which GEMM library dot and convolution call.
    pub gemm: GemmBackend,
    /// Threads the GEMM and the other routines may use (this machine has 2 cores); the JIT's
    /// code generation uses as many while it compiles (`program/codegen_queue.rs`).
    pub gemm_threads: usize,
    /// Count the time of every kernel and routine call (see `host/profile.rs`).
    pub profile: bool,
    /// Compile the profile marks with trace buffers, so runs can be recorded as traces
    /// (`crate::trace`); implies `profile`.
    pub trace: Option<TraceBuffers>,
    /// Which convolution routines may be used (`conv_select.rs`).
    pub conv_algorithm: ConvAlgorithm,
    /// Let a convolution routine add the bias of the add fusion that follows it in its stores
    /// (`routines/bias_match.rs`); off, the add runs as its own kernel. The same bits either
    /// way; the switch is for measuring and testing that.
    pub fold_bias_add: bool,
    /// Let a direct or Winograd convolution routine compute the forward max-pool that reads
    /// its result (after the ReLU and the folded bias add) in its epilogue
    /// (`routines/pool_fold.rs`); off, the pool runs as before (its own routine, or with
    /// its bias add as a generated kernel in the inference form). The same bits either way.
    pub fold_pool: bool,
    /// Let a forward max-pool record its window choices for its gradient, which then reads
    /// them instead of the pre-activation (`routines/pool_choices.rs`); off, the gradient
    /// reads the pre-activation. The same bits either way.
    pub pool_choices: bool,
    /// Let two independent convolutions run side by side, one per core, where
    /// `routines/conv_pair.rs`'s rule allows (only with `gemm_threads` 2 or more); off, each
    /// runs on all threads in turn. The same bits either way.
    pub pair_convolutions: bool,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions {
            dump_to: None,
            opt_level: "speed".into(),
            vectorize: true,
            gemm: GemmBackend::default(),
            gemm_threads: 2,
            profile: false,
            trace: None,
            conv_algorithm: ConvAlgorithm::Auto,
            fold_bias_add: true,
            fold_pool: true,
            pool_choices: true,
            pair_convolutions: true,
        }
    }
}

impl JitOptions {
    /// These options with the routines on one thread: for a convolution of a pair run side by
    /// side (`routines/conv_pair.rs`), the other core running the other one.
    pub fn one_thread(&self) -> JitOptions {
        JitOptions {
            gemm_threads: 1,
            ..self.clone()
        }
    }
}

/// The trace buffers a program is compiled with (`JitOptions::trace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceBuffers {
    /// Replicas the program runs on: one buffer each.
    pub replicas: usize,
    pub options: TraceOptions,
}

/// Which convolution algorithms the JIT may use (`JitOptions::conv_algorithm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvAlgorithm {
    /// The fastest routine whose preconditions hold.
    #[default]
    Auto,
    /// Always the general patch-matrix GEMM (the reference for the specialized routines).
    Gemm,
}

impl std::str::FromStr for ConvAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ConvAlgorithm::Auto),
            "gemm" => Ok(ConvAlgorithm::Gemm),
            other => Err(format!(
                "unknown convolution algorithm `{other}` (expected auto or gemm)"
            )),
        }
    }
}
