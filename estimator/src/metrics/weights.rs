//! Reading a batch's elements and broadcasting its weights to them, by TF's rule.

use super::MetricError;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

/// `[2,3]` for messages.
pub(crate) fn dims_text(a: &Array) -> String {
    format!("{:?}", a.shape.dims.as_slice())
}

/// Checks two arrays have the same dimensions (`what` names the metric).
pub(crate) fn same_dims(what: &'static str, a: &Array, b: &Array) -> Result<(), MetricError> {
    if a.shape.dims != b.shape.dims {
        return Err(MetricError::Shapes {
            what,
            left: dims_text(a),
            right: dims_text(b),
        });
    }
    Ok(())
}

/// Each element's weight: 1 without weights; else `weights` broadcast to `values`' shape
/// (a scalar, or the same rank with every dimension equal or 1, as TF's
/// `assert_broadcastable`; or, beyond TF, the values' leading dimensions, such as a
/// per-example mask for per-example vectors).
pub(crate) fn broadcast_weights(
    values: &Array,
    weights: Option<&Array>,
) -> Result<Vec<f64>, MetricError> {
    let n = values.len();
    let Some(w) = weights else {
        return Ok(vec![1.0; n]);
    };
    let vd = values.shape.dims.as_slice();
    let wd = w.shape.dims.as_slice();
    let bad = || MetricError::Weights {
        values: dims_text(values),
        weights: dims_text(w),
    };
    if wd.is_empty() {
        return Ok(vec![w.data.get_f64(0); n]);
    }
    // Beyond TF's rule: per-example weights `[batch]` (the evaluation mask) weight every
    // element of each example's values `[batch, ...]`, as if expanded with trailing 1s.
    let expanded: Vec<i64>;
    let wd = if wd.len() < vd.len() && wd == &vd[..wd.len()] {
        expanded = wd
            .iter()
            .copied()
            .chain(std::iter::repeat_n(1, vd.len() - wd.len()))
            .collect();
        expanded.as_slice()
    } else {
        wd
    };
    if wd.len() != vd.len() || wd.iter().zip(vd).any(|(&a, &b)| a != b && a != 1) {
        return Err(bad());
    }
    // Row-major strides of the weights, 0 along broadcast dimensions.
    let mut strides = vec![0usize; wd.len()];
    let mut s = 1usize;
    for k in (0..wd.len()).rev() {
        strides[k] = if wd[k] == 1 { 0 } else { s };
        s *= wd[k] as usize;
    }
    Ok((0..n)
        .map(|i| {
            let (mut rest, mut index) = (i, 0);
            for k in (0..vd.len()).rev() {
                let size = vd[k] as usize;
                index += (rest % size) * strides[k];
                rest /= size;
            }
            w.data.get_f64(index)
        })
        .collect())
}

/// Per-element weights of `values` for a padded batch: the user's `weights` (1 when `None`)
/// times the padding `mask` `[batch]`, which weights `values` `[batch, ..]` by its first
/// dimension; `f64` with the values' dimensions.
pub(crate) fn padded_weights(
    values: &Array,
    weights: Option<&Array>,
    mask: &Array,
) -> Result<Array, String> {
    let batch = mask.len() as i64;
    if values.shape.dims.first() != Some(&batch) {
        return Err(format!(
            "the values are {}, but every metric is weighted by the batch's padding mask [{batch}], which needs the batch as their first dimension",
            dims_text(values)
        ));
    }
    let m = broadcast_weights(values, Some(mask)).map_err(|e| e.to_string())?;
    let w = broadcast_weights(values, weights).map_err(|e| e.to_string())?;
    let product: Vec<f64> = m.iter().zip(&w).map(|(a, b)| a * b).collect();
    Ok(Array::new(
        ArrayShape::new(ElementType::F64, values.shape.dims.as_slice()),
        ArrayData::F64(product),
    ))
}
