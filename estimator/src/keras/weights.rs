//! The saved weights of a model, by layer name, in Keras's `layer.weights` order.

use std::collections::BTreeMap;

/// One saved weight array.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedArray {
    /// Keras's weight name (`kernel`, `moving_mean`, ...), possibly with a path before it.
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Layer name → its weights.
pub type SavedWeights = BTreeMap<String, Vec<SavedArray>>;
