//! The graph a model_fn records into: TF1's default graph, made explicit.
//!
//! A model_fn gets `&mut Graph`. Ops on tensors record into its tracer; layers and
//! `get_variable` create variables through its [`VariableStore`]; optimizers record their
//! updates with [`Graph::assign`]. The estimator then builds the step module from it: entry
//! parameters are, in order of creation, the global step, the features and labels, then every
//! variable (model variables first, then optimizer slots, as they were created); the outputs
//! are every variable's value after the step (its assigned value, or itself), the next global
//! step and whatever the spec asks to outfeed.

use super::get_variable::Reuse;
use super::variables::{VariableId, VariableStore};
use std::collections::HashMap;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::{Tensor, Tracer};

/// TPUEstimator's `ModeKeys`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Train,
    Eval,
    Predict,
}

impl Mode {
    /// TF's name for the mode (`train`, `eval`, `infer`), used in logs and directories.
    pub fn tf_name(self) -> &'static str {
        match self {
            Mode::Train => "train",
            Mode::Eval => "eval",
            Mode::Predict => "infer",
        }
    }
}

/// One model_fn's trace: tracer, variables, layer names, mode, global step.
pub struct Graph {
    pub tracer: Tracer,
    pub variables: VariableStore,
    pub mode: Mode,
    /// The global step on the device: an s32 scalar entry parameter (the host keeps the i64
    /// and refuses to start a loop that would pass `i32::MAX`; TPUs have no 64-bit values).
    pub global_step: Tensor,
    /// Base names handed out so far, for TF's `conv2d`, `conv2d_1`, ... numbering.
    layer_names: HashMap<String, usize>,
    /// New values recorded by [`Graph::assign`], by variable.
    assignments: HashMap<VariableId, Tensor>,
    /// The global step after the step, set by an optimizer's `apply_gradients`.
    next_global_step: Option<Tensor>,
    /// Replicas the step runs on (TF's `tpu_function` context `number_of_shards`).
    num_shards: usize,
    /// Open variable scopes, outermost first (see `get_variable.rs`).
    pub(crate) variable_scopes: Vec<(String, Reuse)>,
    /// Random ops traced so far: each gets its own device stream (see `random.rs`).
    random_ops: u32,
    /// EVAL's per-example padding mask (see [`Graph::padding_mask`]).
    padding_mask: Option<Tensor>,
}

impl Graph {
    /// A new graph named `name` for `mode`; its first entry parameter is the global step.
    /// `tf_random_seed` seeds variable initializers (and device randomness).
    pub fn new(name: &str, mode: Mode, tf_random_seed: Option<i64>) -> Graph {
        let mut tracer = Tracer::new(name);
        let global_step = tracer.parameter("global_step", &[] as &[i64], ElementType::S32);
        Graph {
            tracer,
            variables: VariableStore::new(tf_random_seed),
            mode,
            global_step,
            layer_names: HashMap::new(),
            assignments: HashMap::new(),
            next_global_step: None,
            num_shards: 1,
            variable_scopes: Vec::new(),
            random_ops: 0,
            padding_mask: None,
        }
    }

    /// In EVAL, the per-example mask of the batch (f32 `[batch]`, 1 for a real example, 0 for
    /// the zero padding of a short last batch); `None` in TRAIN and PREDICT. The `losses`
    /// functions weight by it, so a loss is the mean over the real examples.
    pub fn padding_mask(&self) -> Option<&Tensor> {
        self.padding_mask.as_ref()
    }

    pub(crate) fn set_padding_mask(&mut self, mask: Tensor) {
        self.padding_mask = Some(mask);
    }

    /// TF's unique layer name for `base`: `conv2d`, then `conv2d_1`, `conv2d_2`, ...
    pub(crate) fn unique_layer_name(&mut self, base: &str) -> String {
        let count = self.layer_names.entry(base.to_string()).or_insert(0);
        let name = match *count {
            0 => base.to_string(),
            n => format!("{base}_{n}"),
        };
        *count += 1;
        name
    }

    /// Records `value` as the variable's value after the step (TF's `assign`). A second
    /// assignment replaces the first, as the last `assign` in a TF1 step wins.
    pub fn assign(&mut self, variable: VariableId, value: Tensor) {
        self.assignments.insert(variable, value);
    }

    /// The number of the next random op of this model_fn (0, 1, ...), part of its stream's key.
    pub(crate) fn next_random_op(&mut self) -> u32 {
        self.random_ops += 1;
        self.random_ops - 1
    }

    /// The value `variable` has after the step: its assignment, or the variable itself.
    pub fn value_after_step(&self, variable: VariableId) -> Tensor {
        self.assignments
            .get(&variable)
            .cloned()
            .unwrap_or_else(|| self.variables.get(variable).tensor.clone())
    }

    /// Records the global step's value after the step (an optimizer's `apply_gradients`
    /// sets `global_step + 1`, TF's `assign_add`). A second call replaces the first.
    pub(crate) fn set_next_global_step(&mut self, value: Tensor) {
        self.next_global_step = Some(value);
    }

    /// The global step after the step: what [`Graph::set_next_global_step`] recorded, or the
    /// step unchanged (EVAL and PREDICT, or a TRAIN graph without an optimizer).
    pub fn next_global_step(&self) -> Tensor {
        self.next_global_step
            .clone()
            .unwrap_or_else(|| self.global_step.clone())
    }

    /// Sets how many replicas (shards) the step runs on; the estimator sets it before calling
    /// the model_fn, as TPUEstimator's `tpu_function` context does. Default 1.
    pub fn set_num_shards(&mut self, num_shards: usize) {
        self.num_shards = num_shards;
    }

    /// How many replicas (shards) the step runs on.
    pub fn num_shards(&self) -> usize {
        self.num_shards
    }
}
