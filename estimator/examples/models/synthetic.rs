//! Synthetic training data for timing, as the TF peers make theirs: a fixed-seed set of
//! random examples, cycled (repeat, batch with drop_remainder, prefetch).

use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_estimator::input::Dataset;
use tessel_estimator::model::threefry::HostStream;
use tessel_estimator::EstimatorError;

/// `examples` rows of `dims` (per example) uniform in `[low, high)`, f32.
pub fn uniform(examples: usize, dims: &[i64], low: f64, high: f64, seed: u32) -> Array {
    let mut s = HostStream::new([seed, 0x5EED]);
    let mut full = vec![examples as i64];
    full.extend_from_slice(dims);
    let shape = ArrayShape::new(ElementType::F32, &full);
    let n = shape.element_count() as usize;
    let v: Vec<f32> = (0..n)
        .map(|_| (low + (high - low) * s.uniform()) as f32)
        .collect();
    Array::new(shape, ArrayData::F32(v))
}

/// `examples` rows of `dims` (per example) of s32 integers in `[0, bound)`.
pub fn integers(examples: usize, dims: &[i64], bound: i32, seed: u32) -> Array {
    let mut s = HostStream::new([seed, 0x1D5]);
    let mut full = vec![examples as i64];
    full.extend_from_slice(dims);
    let shape = ArrayShape::new(ElementType::S32, &full);
    let n = shape.element_count() as usize;
    let v: Vec<i32> = (0..n)
        .map(|_| ((s.uniform() * bound as f64) as i32).min(bound - 1))
        .collect();
    Array::new(shape, ArrayData::S32(v))
}

/// Features `name` with an s32 `label` in 0..10 per example.
pub fn labelled(name: &str, features: Array, seed: u32) -> Result<Dataset, EstimatorError> {
    let examples = features.shape.dims.as_slice()[0] as usize;
    let labels = integers(examples, &[], 10, seed.wrapping_add(1));
    Ok(Dataset::from_tensor_slices(vec![
        (name.to_string(), features),
        ("label".to_string(), labels),
    ])?)
}
