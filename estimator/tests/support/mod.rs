//! Helpers shared by the estimator's integration tests: running a traced graph on the
//! interpreter or the JIT, random test data, and the guide's model_fn.
#![allow(dead_code)]

pub mod guide_model;
pub mod step;
pub mod tiny;

#[allow(unused_imports)]
pub use step::*;

use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Module};
use tessel_estimator::model::threefry::HostStream;
use tessel_runtime::session::{compile, Device, Outputs};

/// Runs `module` once on `device` with arguments in parameter order; the root's leaves.
pub fn run(module: &Module, device: &Device, args: Vec<Array>) -> Vec<Array> {
    let program = compile(module, device).expect("compiles");
    let inputs = program.bind_ordered(args).expect("binds");
    match program.run(&inputs).expect("runs") {
        Outputs::Global(leaves) => leaves,
        Outputs::PerReplica(mut r) => r.remove(0),
    }
}

/// Uniform values in [-1, 1) of type `ty` from a fixed stream.
pub fn random_array(dims: &[i64], ty: ElementType, seed: u32) -> Array {
    let mut s = HostStream::new([seed, 0xC0FFEE]);
    let shape = ArrayShape::new(ty, dims);
    let n = shape.element_count() as usize;
    let v: Vec<f64> = (0..n).map(|_| 2.0 * s.uniform() - 1.0).collect();
    Array::new(shape, ArrayData::from_f64_fn(ty, n, |i| v[i]))
}

pub fn values(a: &Array) -> Vec<f64> {
    (0..a.len()).map(|i| a.data.get_f64(i)).collect()
}

/// Asserts `|a - b| <= tol * max(1, |b|)` elementwise.
pub fn assert_close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * y.abs().max(1.0),
            "{what}[{i}]: {x} vs {y} (tolerance {tol})"
        );
    }
}

pub fn scalar_step(step: i32) -> Array {
    Array::scalar_s32(step)
}
