//! Shape ops: reshape (with one `-1`), transpose, broadcast, slice, concatenate.

use super::dims::{broadcast_dims, normalize_axis, Dim, IntoDims};
use super::tensor::Tensor;
use crate::ir::{Op, SliceDim};
use crate::trace::dims::array_shape;
use std::panic::Location;

impl Tensor {
    /// Reshapes to `dims`; one entry may be `-1` (its size is inferred). An unknown input
    /// dimension makes the `-1` entry unknown.
    #[track_caller]
    pub fn reshape(&self, dims: &[i64]) -> Tensor {
        Tensor::op("reshape", false, Location::caller(), &[self], |cx, v| {
            let input = cx.dims(v[0]);
            let bad =
                |why: &str| format!("cannot reshape {} to {dims:?}: {why}", cx.describe(v[0]));
            if dims.iter().filter(|&&d| d == -1).count() > 1 {
                return Err(bad("more than one -1"));
            }
            if dims.iter().any(|&d| d < -1) {
                return Err(bad("negative size"));
            }
            let known: i64 = dims.iter().filter(|&&d| d != -1).product();
            let input_unknown = input.iter().any(|d| d.is_unknown());
            let input_count: i64 = input.iter().filter_map(|d| d.fixed()).product();
            let out: Vec<Dim> = if dims.contains(&-1) {
                if input_unknown {
                    // The `-1` takes whatever the unknown dimension brings.
                    if known == 0 {
                        return Err(bad("a known size is 0"));
                    }
                    dims.iter()
                        .map(|&d| if d == -1 { Dim::Unknown } else { Dim::Fixed(d) })
                        .collect()
                } else {
                    if known == 0 || input_count % known != 0 {
                        return Err(bad(
                            "the element count is not a multiple of the known sizes",
                        ));
                    }
                    dims.iter()
                        .map(|&d| Dim::Fixed(if d == -1 { input_count / known } else { d }))
                        .collect()
                }
            } else {
                if !input_unknown && known != input_count {
                    return Err(bad("the element counts differ"));
                }
                dims.iter().map(|&d| Dim::Fixed(d)).collect()
            };
            Ok(cx.reshape_to(v[0], &out))
        })
    }

    /// Permutes dimensions: output dimension `i` is input dimension `permutation[i]`.
    #[track_caller]
    pub fn transpose(&self, permutation: &[i64]) -> Tensor {
        Tensor::op("transpose", false, Location::caller(), &[self], |cx, v| {
            let input = cx.dims(v[0]);
            let mut sorted = permutation.to_vec();
            sorted.sort();
            if sorted != (0..input.len() as i64).collect::<Vec<_>>() {
                return Err(format!(
                    "{permutation:?} is not a permutation of the dimensions of {}",
                    cx.describe(v[0])
                ));
            }
            let out: Vec<Dim> = permutation.iter().map(|&p| input[p as usize]).collect();
            let shape = array_shape(cx.ty(v[0]), &out);
            Ok(cx.emit_array(
                Op::Transpose {
                    permutation: permutation.to_vec(),
                },
                shape,
                &[v[0]],
            ))
        })
    }

    /// Numpy-style broadcast to `dims`.
    #[track_caller]
    pub fn broadcast_to(&self, dims: impl IntoDims) -> Tensor {
        let dims = dims.into_dims();
        Tensor::op("broadcast", false, Location::caller(), &[self], |cx, v| {
            cx.broadcast_to(v[0], &dims)
        })
    }

    /// Broadcasts to the common numpy shape of `self` and `other` (`other`'s values unused).
    #[track_caller]
    pub fn broadcast_like(&self, other: &Tensor) -> Tensor {
        Tensor::op(
            "broadcast",
            false,
            Location::caller(),
            &[self, other],
            |cx, v| {
                let dims = broadcast_dims(&cx.dims(v[0]), &cx.dims(v[1])).ok_or_else(|| {
                    format!(
                        "shapes {} and {} do not broadcast",
                        cx.describe(v[0]),
                        cx.describe(v[1])
                    )
                })?;
                cx.broadcast_to(v[0], &dims)
            },
        )
    }

    /// Elements `starts[i] .. limits[i]` of every dimension `i` (stride 1).
    #[track_caller]
    pub fn slice(&self, starts: &[i64], limits: &[i64]) -> Tensor {
        Tensor::op("slice", false, Location::caller(), &[self], |cx, v| {
            let input = cx.dims(v[0]);
            if starts.len() != input.len() || limits.len() != input.len() {
                return Err(format!(
                    "slice of {} needs {} starts and limits, got {starts:?} and {limits:?}",
                    cx.describe(v[0]),
                    input.len()
                ));
            }
            let mut out = Vec::new();
            for (i, d) in input.iter().enumerate() {
                let (s, l) = (starts[i], limits[i]);
                let fits = match d {
                    Dim::Fixed(n) => 0 <= s && s <= l && l <= *n,
                    Dim::Unknown => false,
                };
                if !fits {
                    return Err(format!(
                        "slice [{s}:{l}] of dimension {i} of {} is out of range",
                        cx.describe(v[0])
                    ));
                }
                out.push(Dim::Fixed(l - s));
            }
            let dims = starts
                .iter()
                .zip(limits)
                .map(|(&start, &limit)| SliceDim {
                    start,
                    limit,
                    stride: 1,
                })
                .collect();
            let shape = array_shape(cx.ty(v[0]), &out);
            Ok(cx.emit_array(Op::Slice { dims }, shape, &[v[0]]))
        })
    }

    /// Joins `self` and `others` (in that order) along `axis`; all other dimensions and the
    /// element types must agree.
    #[track_caller]
    pub fn concat(&self, others: &[&Tensor], axis: i64) -> Tensor {
        let mut tensors = vec![self];
        tensors.extend_from_slice(others);
        Tensor::op(
            "concatenate",
            false,
            Location::caller(),
            &tensors,
            |cx, v| {
                let rank = cx.rank(v[0]);
                let ax = normalize_axis(axis, rank).ok_or_else(|| {
                    format!("axis {axis} is out of range for {}", cx.describe(v[0]))
                })?;
                let ty = cx.ty(v[0]);
                let mut out = cx.dims(v[0]);
                for &id in &v[1..] {
                    let d = cx.dims(id);
                    let same_rest = d.len() == rank
                        && (0..rank).all(|i| i == ax || d[i] == out[i])
                        && cx.ty(id) == ty;
                    if !same_rest {
                        let shapes: Vec<String> = v.iter().map(|&i| cx.describe(i)).collect();
                        return Err(format!(
                            "cannot concatenate {} along axis {axis}",
                            shapes.join(", ")
                        ));
                    }
                    out[ax] = match (out[ax], d[ax]) {
                        (Dim::Fixed(a), Dim::Fixed(b)) => Dim::Fixed(a + b),
                        _ => Dim::Unknown,
                    };
                }
                let shape = array_shape(ty, &out);
                Ok(cx.emit_array(
                    Op::Concatenate {
                        dimension: ax as i64,
                    },
                    shape,
                    v,
                ))
            },
        )
    }
}
