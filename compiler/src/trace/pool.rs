//! Average pooling as TensorFlow computes it: a `reduce-window` sum divided by the number of
//! input elements each window covers. With SAME padding a border window covers fewer elements
//! than its size, and TF divides by that count (padding is not averaged in).

use super::dims::{array_shape, Dim};
use super::nn::{spatial_windows, Padding};
use super::tensor::Tensor;
use super::tracer::RegionKind;
use crate::ir::{Array, ArrayData, ArrayShape, BinaryOp, Literal, Op, Window, WindowDim};
use std::panic::Location;

/// How many of `input` positions the window at each output position covers, along one
/// dimension (windows start at `o * stride - pad_low`).
fn valid_counts(input: i64, w: &WindowDim, out: i64) -> Vec<i64> {
    (0..out)
        .map(|o| {
            let start = o * w.stride - w.pad_low;
            let end = start + w.size;
            end.min(input) - start.max(0)
        })
        .collect()
}

impl Tensor {
    /// Average pooling of an NHWC input over `ksize` windows (TF's `avg_pool`): the mean of
    /// the input elements inside each window, border windows of SAME padding included.
    #[track_caller]
    pub fn avg_pool(&self, ksize: [i64; 2], strides: [i64; 2], padding: Padding) -> Tensor {
        Tensor::op("avg_pool", true, Location::caller(), &[self], |cx, v| {
            let x = cx.dims(v[0]);
            let ty = cx.ty(v[0]);
            if x.len() != 4 || !ty.is_float() {
                return Err(format!(
                    "avg_pool needs a floating-point NHWC input, got {}",
                    cx.describe(v[0])
                ));
            }
            let (spatial, out) = spatial_windows(cx, v[0], "avg_pool", ksize, strides, padding)?;
            let (Dim::Fixed(h), Dim::Fixed(w)) = (x[1], x[2]) else {
                unreachable!("spatial_windows checked the spatial dimensions")
            };
            let rows = valid_counts(h, &spatial[0], out[0]);
            let cols = valid_counts(w, &spatial[1], out[1]);
            let mut dims = vec![WindowDim::new(1)];
            dims.extend(spatial);
            dims.push(WindowDim::new(1));
            let zero = cx.constant_scalar(ty, 0.0);
            let region = cx.region(RegionKind::Sum, ty);
            let out_dims = [x[0], Dim::Fixed(out[0]), Dim::Fixed(out[1]), x[3]];
            let sums = cx.emit_array(
                Op::ReduceWindow {
                    window: Window { dims },
                    to_apply: region,
                },
                array_shape(ty, &out_dims),
                &[v[0], zero],
            );
            // The counts are static: a [1, OH, OW, 1] constant broadcast over batch and channels.
            let n = (out[0] * out[1]) as usize;
            let counts = ArrayData::from_f64_fn(ty, n, |i| {
                (rows[i / out[1] as usize] * cols[i % out[1] as usize]) as f64
            });
            let shape = ArrayShape::new(ty, &[1, out[0], out[1], 1]);
            let counts = cx.emit_array(
                Op::Constant(Literal::Array(Array::new(shape.clone(), counts))),
                shape,
                &[],
            );
            cx.binary(BinaryOp::Divide, sums, counts)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_padding_border_windows_count_only_the_input() {
        // 5 wide, window 3, stride 2, SAME: out 3, total padding 2 -> (1, 1).
        let w = WindowDim {
            stride: 2,
            pad_low: 1,
            pad_high: 1,
            ..WindowDim::new(3)
        };
        assert_eq!(valid_counts(5, &w, 3), vec![2, 3, 2]);
        let valid = WindowDim {
            stride: 2,
            ..WindowDim::new(2)
        };
        assert_eq!(valid_counts(4, &valid, 2), vec![2, 2]);
    }
}
