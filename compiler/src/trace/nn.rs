//! Neural-network ops: matmul, conv2d (NHWC, HWIO), max_pool, relu, softmax and its
//! cross-entropy, one_hot, dropout. Layouts and padding rules follow TensorFlow.

use super::dims::{array_shape, Dim};
use super::emit::{Emitter, OpResult};
use super::reduce::{broadcast_back, reduce_with, resolve_axes};
use super::tensor::Tensor;
use super::tracer::RegionKind;
use crate::ir::{
    BinaryOp, ComparisonDirection, ConvDimensionNumbers, Convolution, DotDimensionNumbers,
    ElementType, InstrId, Op, UnaryOp, Window, WindowDim,
};
use std::panic::Location;

/// How a window treats the border, as in TensorFlow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Pad so that the output has `ceil(input / stride)` positions (extra padding at the end).
    Same,
    /// No padding: only windows that fit entirely.
    Valid,
}

impl Padding {
    /// Output size and (low, high) padding of one spatial dimension of `input` positions for a
    /// window of `size` moved by `stride`, by TensorFlow's rules; `None` when no window fits
    /// (or the size or stride is not positive).
    pub fn window_geometry(self, input: i64, size: i64, stride: i64) -> Option<(i64, i64, i64)> {
        if size < 1 || stride < 1 {
            return None;
        }
        match self {
            Padding::Valid => (input >= size).then(|| ((input - size) / stride + 1, 0, 0)),
            Padding::Same => {
                let out = (input + stride - 1) / stride;
                let total = ((out - 1) * stride + size - input).max(0);
                Some((out, total / 2, total - total / 2))
            }
        }
    }
}

/// The windowed spatial dimensions (1 and 2 of NHWC) for a window `size` and `strides`.
pub(super) fn spatial_windows(
    cx: &Emitter,
    x: InstrId,
    what: &str,
    size: [i64; 2],
    strides: [i64; 2],
    padding: Padding,
) -> Result<(Vec<WindowDim>, [i64; 2]), String> {
    let dims = cx.dims(x);
    let mut windows = Vec::new();
    let mut out = [0; 2];
    for k in 0..2 {
        let Dim::Fixed(input) = dims[1 + k] else {
            return Err(format!(
                "{what} needs fixed spatial dimensions, got {}",
                cx.describe(x)
            ));
        };
        let (o, lo, hi) = padding.window_geometry(input, size[k], strides[k]).ok_or_else(|| {
            format!(
                "{what}: window {size:?} with strides {strides:?} and {padding:?} padding does not fit {}",
                cx.describe(x)
            )
        })?;
        out[k] = o;
        windows.push(WindowDim {
            stride: strides[k],
            pad_low: lo,
            pad_high: hi,
            ..WindowDim::new(size[k])
        });
    }
    Ok((windows, out))
}

/// Reduces `x` over `axis` and broadcasts the result back to `x`'s shape.
fn reduce_back(cx: &mut Emitter, x: InstrId, axis: i64, kind: RegionKind) -> OpResult {
    let axes = resolve_axes(cx, x, &[axis])?;
    let dims = cx.dims(x);
    let r = cx.reduce(x, &axes, kind);
    Ok(broadcast_back(cx, r, &dims, &axes))
}

/// `x - max(x)` along `axis`, the shifted logits every softmax variant starts from.
fn shifted(cx: &mut Emitter, x: InstrId, axis: i64) -> OpResult {
    let max = reduce_back(cx, x, axis, RegionKind::Max)?;
    cx.binary(BinaryOp::Subtract, x, max)
}

/// `log_softmax(x)` along `axis`: `x - max - log(sum(exp(x - max)))`.
fn log_softmax_with(cx: &mut Emitter, x: InstrId, axis: i64) -> OpResult {
    float_operand(cx, x, "log_softmax")?;
    let z = shifted(cx, x, axis)?;
    let e = cx.unary(UnaryOp::Exp, z)?;
    let axes = resolve_axes(cx, e, &[axis])?;
    let dims = cx.dims(e);
    let s = cx.reduce(e, &axes, RegionKind::Sum);
    let l = cx.unary(UnaryOp::Log, s)?;
    let l = broadcast_back(cx, l, &dims, &axes);
    cx.binary(BinaryOp::Subtract, z, l)
}

fn float_operand(cx: &Emitter, x: InstrId, what: &str) -> Result<(), String> {
    if cx.ty(x).is_float() {
        Ok(())
    } else {
        Err(format!(
            "{what} needs a floating-point operand, got {} (cast it first)",
            cx.describe(x)
        ))
    }
}

impl Tensor {
    /// Matrix product: `[.., m, k] x [.., k, n] -> [.., m, n]` (leading batch dimensions must
    /// agree). Traced as one `dot`.
    #[track_caller]
    pub fn matmul(&self, rhs: &Tensor) -> Tensor {
        Tensor::op(
            "matmul",
            false,
            Location::caller(),
            &[self, rhs],
            |cx, v| {
                let (a, b) = (cx.dims(v[0]), cx.dims(v[1]));
                let bad = |why: &str| {
                    format!(
                        "cannot multiply {} by {}: {why}",
                        cx.describe(v[0]),
                        cx.describe(v[1])
                    )
                };
                if a.len() < 2 || a.len() != b.len() {
                    return Err(bad("matmul needs two operands of the same rank >= 2"));
                }
                if cx.ty(v[0]) != cx.ty(v[1]) {
                    return Err(bad("the element types differ"));
                }
                let r = a.len();
                let batch = r - 2;
                if a[..batch] != b[..batch] {
                    return Err(bad("the batch dimensions differ"));
                }
                if let (Dim::Fixed(k1), Dim::Fixed(k2)) = (a[r - 1], b[r - 2]) {
                    if k1 != k2 {
                        return Err(bad("the inner dimensions differ"));
                    }
                }
                let mut out = a[..batch].to_vec();
                out.extend([a[r - 2], b[r - 1]]);
                let batch_dims: Vec<i64> = (0..batch as i64).collect();
                let numbers = DotDimensionNumbers {
                    lhs_batch: batch_dims.clone(),
                    rhs_batch: batch_dims,
                    lhs_contracting: vec![r as i64 - 1],
                    rhs_contracting: vec![r as i64 - 2],
                };
                let shape = array_shape(cx.ty(v[0]), &out);
                Ok(cx.emit_array(Op::Dot(numbers), shape, v))
            },
        )
    }

    /// 2-D convolution of an NHWC input with an HWIO filter (TensorFlow's `conv2d`).
    #[track_caller]
    pub fn conv2d(&self, filter: &Tensor, strides: [i64; 2], padding: Padding) -> Tensor {
        Tensor::op(
            "conv2d",
            false,
            Location::caller(),
            &[self, filter],
            |cx, v| {
                let (x, f) = (cx.dims(v[0]), cx.dims(v[1]));
                let bad = |why: &str| {
                    format!(
                        "conv2d of input {} (NHWC) with filter {} (HWIO): {why}",
                        cx.describe(v[0]),
                        cx.describe(v[1])
                    )
                };
                if x.len() != 4 || f.len() != 4 {
                    return Err(bad("both must have rank 4"));
                }
                if cx.ty(v[0]) != cx.ty(v[1]) {
                    return Err(bad("the element types differ"));
                }
                let (Dim::Fixed(kh), Dim::Fixed(kw), Dim::Fixed(fi), Dim::Fixed(fo)) =
                    (f[0], f[1], f[2], f[3])
                else {
                    return Err(bad("the filter must have fixed dimensions"));
                };
                if x[3] != Dim::Fixed(fi) {
                    return Err(bad(
                        "input channels differ from the filter's input channels",
                    ));
                }
                let (window, out) =
                    spatial_windows(cx, v[0], "conv2d", [kh, kw], strides, padding)?;
                let conv = Convolution {
                    window: Window { dims: window },
                    dims: ConvDimensionNumbers::nhwc_hwio(),
                    feature_group_count: 1,
                    batch_group_count: 1,
                };
                let dims = [x[0], Dim::Fixed(out[0]), Dim::Fixed(out[1]), Dim::Fixed(fo)];
                let shape = array_shape(cx.ty(v[0]), &dims);
                Ok(cx.emit_array(Op::Convolution(conv), shape, v))
            },
        )
    }

    /// Max pooling of an NHWC input over `ksize` windows (a `reduce-window` with `max`).
    #[track_caller]
    pub fn max_pool(&self, ksize: [i64; 2], strides: [i64; 2], padding: Padding) -> Tensor {
        Tensor::op("max_pool", false, Location::caller(), &[self], |cx, v| {
            let x = cx.dims(v[0]);
            if x.len() != 4 {
                return Err(format!(
                    "max_pool needs an NHWC input, got {}",
                    cx.describe(v[0])
                ));
            }
            let (spatial, out) = spatial_windows(cx, v[0], "max_pool", ksize, strides, padding)?;
            let mut dims = vec![WindowDim::new(1)];
            dims.extend(spatial);
            dims.push(WindowDim::new(1));
            let ty = cx.ty(v[0]);
            let init = cx.lowest(ty);
            let region = cx.region(RegionKind::Max, ty);
            let out_dims = [x[0], Dim::Fixed(out[0]), Dim::Fixed(out[1]), x[3]];
            Ok(cx.emit_array(
                Op::ReduceWindow {
                    window: Window { dims },
                    to_apply: region,
                },
                array_shape(ty, &out_dims),
                &[v[0], init],
            ))
        })
    }

    /// `max(x, 0)`.
    #[track_caller]
    pub fn relu(&self) -> Tensor {
        Tensor::op("relu", true, Location::caller(), &[self], |cx, v| {
            cx.binary_scalar(BinaryOp::Maximum, v[0], 0.0)
        })
    }

    /// `exp(x) / sum(exp(x))` along `axis`, computed from `x - max(x)` for stability.
    #[track_caller]
    pub fn softmax(&self, axis: i64) -> Tensor {
        Tensor::op("softmax", true, Location::caller(), &[self], |cx, v| {
            float_operand(cx, v[0], "softmax")?;
            let z = shifted(cx, v[0], axis)?;
            let e = cx.unary(UnaryOp::Exp, z)?;
            let s = reduce_back(cx, e, axis, RegionKind::Sum)?;
            cx.binary(BinaryOp::Divide, e, s)
        })
    }

    /// `log(softmax(x))` along `axis`, computed without forming the softmax.
    #[track_caller]
    pub fn log_softmax(&self, axis: i64) -> Tensor {
        Tensor::op("log_softmax", true, Location::caller(), &[self], |cx, v| {
            log_softmax_with(cx, v[0], axis)
        })
    }

    /// Per-example cross-entropy `-sum(labels * log_softmax(logits), -1)` of these logits
    /// against `labels` (probabilities of the same shape, e.g. a `one_hot`).
    #[track_caller]
    pub fn softmax_cross_entropy_with_logits(&self, labels: &Tensor) -> Tensor {
        Tensor::op(
            "softmax_cross_entropy",
            true,
            Location::caller(),
            &[self, labels],
            |cx, v| {
                if cx.dims(v[0]) != cx.dims(v[1]) {
                    return Err(format!(
                        "logits {} and labels {} must have the same shape",
                        cx.describe(v[0]),
                        cx.describe(v[1])
                    ));
                }
                let logp = log_softmax_with(cx, v[0], -1)?;
                let prod = cx.binary(BinaryOp::Multiply, v[1], logp)?;
                let sum = reduce_with(cx, prod, &[-1], false, RegionKind::Sum)?;
                cx.unary(UnaryOp::Negate, sum)
            },
        )
    }

    /// Integer class labels `[..]` to `[.., depth]` vectors of `ty` with a 1 at the label.
    #[track_caller]
    pub fn one_hot(&self, depth: i64, ty: ElementType) -> Tensor {
        Tensor::op("one_hot", true, Location::caller(), &[self], |cx, v| {
            let labels_ty = cx.ty(v[0]);
            if !labels_ty.is_integer() || depth < 1 {
                return Err(format!(
                    "needs integer labels and a positive depth, got {} and depth {depth}",
                    cx.describe(v[0])
                ));
            }
            let mut dims = cx.dims(v[0]);
            let rank = dims.len();
            dims.push(Dim::Fixed(depth));
            let classes = cx.iota(labels_ty, &dims, rank);
            let expanded = cx.emit_array(
                Op::Broadcast {
                    dimensions: (0..rank as i64).collect(),
                },
                array_shape(labels_ty, &dims),
                &[v[0]],
            );
            let hit = cx.compare(ComparisonDirection::Eq, expanded, classes)?;
            Ok(cx.convert(hit, ty))
        })
    }

    /// Inverted dropout driven by `noise` (uniform in [0, 1), broadcastable to `self`):
    /// keeps elements where `noise >= rate` and scales them by `1 / (1 - rate)`.
    #[track_caller]
    pub fn dropout(&self, noise: &Tensor, rate: f64) -> Tensor {
        Tensor::op(
            "dropout",
            true,
            Location::caller(),
            &[self, noise],
            |cx, v| {
                if !(0.0..1.0).contains(&rate) {
                    return Err(format!("the dropout rate must be in [0, 1), got {rate}"));
                }
                float_operand(cx, v[0], "dropout")?;
                let threshold = cx.constant_scalar(cx.ty(v[1]), rate);
                let keep = cx.compare(ComparisonDirection::Ge, v[1], threshold)?;
                let scaled = cx.binary_scalar(BinaryOp::Multiply, v[0], 1.0 / (1.0 - rate))?;
                let zero = cx.constant_scalar(cx.ty(v[0]), 0.0);
                cx.select(keep, scaled, zero)
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_matches_tensorflow() {
        assert_eq!(Padding::Same.window_geometry(28, 5, 1), Some((28, 2, 2)));
        assert_eq!(Padding::Same.window_geometry(28, 2, 2), Some((14, 0, 0)));
        assert_eq!(Padding::Same.window_geometry(7, 2, 2), Some((4, 0, 1)));
        assert_eq!(Padding::Valid.window_geometry(28, 5, 1), Some((24, 0, 0)));
        assert_eq!(Padding::Valid.window_geometry(3, 5, 1), None);
    }
}
