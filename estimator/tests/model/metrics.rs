//! Host streaming metrics against hand-computed values, with weights (padded examples
//! weigh 0), over several batches, and their shape errors.

use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_estimator::metrics::{
    Accuracy, Mean, MeanSquaredError, Metric, MetricError, Precision, Recall,
};

fn s32(values: &[i32]) -> Array {
    let shape = ArrayShape::new(ElementType::S32, &[values.len() as i64]);
    Array::new(shape, ArrayData::S32(values.to_vec()))
}

fn f32v(dims: &[i64], values: &[f32]) -> Array {
    Array::f32(dims, values.to_vec())
}

#[test]
fn accuracy_streams_over_batches_and_ignores_zero_weight_padding() {
    let mut acc = Accuracy::new();
    assert_eq!(acc.result(), 0.0, "no examples yet");
    acc.update(&s32(&[1, 2, 3, 4]), &s32(&[1, 2, 0, 4]), None)
        .unwrap();
    assert_eq!(acc.result(), 0.75);
    // Second batch: two real examples (one right), two padded ones that would be wrong.
    let weights = f32v(&[4], &[1.0, 1.0, 0.0, 0.0]);
    acc.update(&s32(&[5, 6, 7, 8]), &s32(&[5, 0, 0, 0]), Some(&weights))
        .unwrap();
    assert_eq!(acc.result(), 4.0 / 6.0);
}

#[test]
fn accuracy_casts_float_predictions_to_integer_labels() {
    let mut acc = Accuracy::new();
    acc.update(&s32(&[1, 2]), &f32v(&[2], &[0.9, 2.0]), None)
        .unwrap();
    assert_eq!(acc.result(), 0.5, "0.9 truncates to 0, as TF's cast does");
}

#[test]
fn mean_weights_broadcast_by_tfs_rule() {
    let mut m = Mean::new();
    let values = f32v(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // Per-row weights [2,1]: row 0 weighs 1, row 1 weighs 3.
    m.update(&values, Some(&f32v(&[2, 1], &[1.0, 3.0])))
        .unwrap();
    assert_eq!(m.result(), (6.0 + 3.0 * 15.0) / 12.0);
    assert_eq!(m.count(), 12.0);
    // A scalar weight.
    m.update(&f32v(&[1], &[10.0]), Some(&Array::scalar_f32(2.0)))
        .unwrap();
    assert_eq!(m.result(), (51.0 + 20.0) / 14.0);
    let err = m
        .update(&values, Some(&f32v(&[3], &[1.0, 1.0, 1.0])))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "weights can not be broadcast to values. values.shape=[2, 3]. weights.shape=[3]."
    );
}

#[test]
fn mean_squared_error_is_weighted() {
    let mut mse = MeanSquaredError::new();
    let labels = f32v(&[3], &[1.0, 2.0, 3.0]);
    let predictions = f32v(&[3], &[1.5, 0.0, 3.0]);
    mse.update(&labels, &predictions, Some(&f32v(&[3], &[2.0, 1.0, 0.0])))
        .unwrap();
    assert_eq!(mse.result(), (2.0 * 0.25 + 4.0) / 3.0);
}

#[test]
fn precision_and_recall_count_weighted_positives() {
    let labels = s32(&[1, 1, 0, 0, 1, 0]);
    let predictions = s32(&[1, 0, 1, 0, 1, 1]);
    let weights = f32v(&[6], &[1.0, 2.0, 1.0, 1.0, 1.0, 0.0]);
    let (mut p, mut r) = (Precision::new(), Recall::new());
    p.update(&labels, &predictions, Some(&weights)).unwrap();
    r.update(&labels, &predictions, Some(&weights)).unwrap();
    // tp = 1 + 1, fp = 1 (the last weighs 0), fn = 2.
    assert_eq!(p.result(), 2.0 / 3.0);
    assert_eq!(r.result(), 2.0 / 4.0);
    let (mut p, mut r) = (Precision::new(), Recall::new());
    p.update(&s32(&[0, 0]), &s32(&[0, 0]), None).unwrap();
    r.update(&s32(&[0, 0]), &s32(&[0, 0]), None).unwrap();
    assert_eq!(
        (p.result(), r.result()),
        (0.0, 0.0),
        "no positives: 0, not NaN"
    );
}

#[test]
fn mismatched_labels_and_predictions_are_errors() {
    let err = Accuracy::new()
        .update(&s32(&[1, 2, 3]), &s32(&[1, 2]), None)
        .unwrap_err();
    assert_eq!(
        err,
        MetricError::Shapes {
            what: "accuracy",
            left: "[3]".into(),
            right: "[2]".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "accuracy: shapes [3] and [2] are incompatible"
    );
}
