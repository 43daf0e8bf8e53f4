//! The padding mask in every reduction: a padded batch's loss is the loss of its real rows.

use super::*;
use crate::model::{Graph, Mode};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_runtime::session::{compile, Device, Outputs};

fn f32_array(dims: &[i64], v: &[f32]) -> Array {
    Array::new(
        ArrayShape::new(ElementType::F32, dims),
        ArrayData::F32(v.to_vec()),
    )
}

/// Per-row squared errors `[4, 2]` (rows 0..3 real, row 3 padding) reduced with and without
/// weights; returns each result.
fn padded(reduction: Reduction, weighted: bool) -> Vec<f64> {
    let mut g = Graph::new("padded", Mode::Eval, Some(1));
    let mask = g.tracer.parameter("mask", &[4], ElementType::F32);
    g.set_padding_mask(mask);
    let labels = g.tracer.constant(f32_array(&[4, 2], &[0.0; 8]));
    let predictions = g.tracer.constant(f32_array(
        &[4, 2],
        &[1.0, 2.0, 3.0, 0.0, 0.0, 1.0, 9.0, 9.0],
    ));
    let weights = g.tracer.constant(f32_array(&[4, 1], &[1.0, 0.0, 2.0, 5.0]));
    let w = weighted.then_some(&weights);
    let loss = mean_squared_error(&g, &labels, &predictions, w, reduction);
    let module = g.tracer.finish(&[&loss]).expect("traces");
    let program = compile(&module, &Device::interpreter()).expect("compiles");
    let inputs = program
        .bind_ordered(vec![
            Array::scalar_s32(0),
            f32_array(&[4], &[1.0, 1.0, 1.0, 0.0]),
        ])
        .expect("binds");
    let out = match program.run(&inputs).expect("runs") {
        Outputs::Global(leaves) => leaves,
        Outputs::PerReplica(mut r) => r.remove(0),
    };
    (0..out[0].len()).map(|i| out[0].data.get_f64(i)).collect()
}

#[test]
fn the_mask_keeps_padding_out_of_every_reduction() {
    // Squared errors of the real rows: [1, 4], [9, 0], [0, 1]; row 3 ([81, 81]) is padding.
    assert_eq!(
        padded(Reduction::None, false),
        vec![1.0, 4.0, 9.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    );
    assert_eq!(padded(Reduction::Sum, false), vec![15.0]);
    assert_eq!(padded(Reduction::Mean, false), vec![2.5]);
    assert_eq!(padded(Reduction::SumOverBatchSize, false), vec![2.5]);
    assert_eq!(padded(Reduction::SumByNonzeroWeights, false), vec![2.5]);
    // Weights [1, 0, 2, 5] per row: weighted sum 1 + 4 + 0 + 2 = 7 over the real rows.
    assert_eq!(padded(Reduction::Sum, true), vec![7.0]);
    assert_eq!(padded(Reduction::Mean, true), vec![(7.0f32 / 6.0) as f64]);
    assert_eq!(
        padded(Reduction::SumOverBatchSize, true),
        vec![(7.0f32 / 6.0) as f64]
    );
    assert_eq!(
        padded(Reduction::SumByNonzeroWeights, true),
        vec![7.0 / 4.0]
    );
}
