//! `convolution` with any dim_labels, padding, stride, lhs/rhs dilation, window reversal,
//! feature_group_count and batch_group_count.
//!
//! The input is rearranged to `[batch, spatial..., feature]`, the kernel to
//! `[spatial..., in-feature, out-feature]`, and the result is computed as
//! `[batch, spatial..., out-feature]` with the innermost loop over a contiguous run of output
//! features, then rearranged to the output's dim_labels.
//!
//! Groups: with feature_group_count G, output feature `o` belongs to group `o / (O/G)` and
//! reads input features `[g*C/G, (g+1)*C/G)`. With batch_group_count Bg, output feature `o`
//! belongs to group `g = o / (O/Bg)` and reads input batch `g * (N/Bg) + b` for output batch
//! `b`. XLA allows only one of the two to exceed 1.

use super::dot::{acc_type, arranged, finish, AccType, Mac};
use super::shape_ops::strides_of;
use super::{err, EvalResult};
use crate::ir::{Array, ArrayShape, Convolution};

pub(crate) fn convolution(
    lhs: &Array,
    rhs: &Array,
    conv: &Convolution,
    out: &ArrayShape,
) -> EvalResult<Array> {
    let g = Geometry::new(lhs, rhs, conv, out)?;
    let input_perm: Vec<usize> = std::iter::once(conv.dims.input_batch)
        .chain(conv.dims.input_spatial.iter().copied())
        .chain(std::iter::once(conv.dims.input_feature))
        .map(|d| d as usize)
        .collect();
    let kernel_perm: Vec<usize> = conv
        .dims
        .kernel_spatial
        .iter()
        .copied()
        .chain([
            conv.dims.kernel_input_feature,
            conv.dims.kernel_output_feature,
        ])
        .map(|d| d as usize)
        .collect();
    let canonical = match acc_type(out.element_type)? {
        AccType::F32 => finish(
            g.run::<f32>(&arranged(lhs, &input_perm)?, &arranged(rhs, &kernel_perm)?),
            &g.canonical_shape(out),
        ),
        AccType::F64 => finish(
            g.run::<f64>(&arranged(lhs, &input_perm)?, &arranged(rhs, &kernel_perm)?),
            &g.canonical_shape(out),
        ),
        AccType::I64 => finish(
            g.run::<i64>(&arranged(lhs, &input_perm)?, &arranged(rhs, &kernel_perm)?),
            &g.canonical_shape(out),
        ),
    };
    // Canonical axis of each output dimension: batch is 0, spatial i is 1+i, feature last.
    let rank = out.rank();
    let mut axis_of = vec![0usize; rank];
    axis_of[conv.dims.output_batch as usize] = 0;
    for (i, &d) in conv.dims.output_spatial.iter().enumerate() {
        axis_of[d as usize] = 1 + i;
    }
    axis_of[conv.dims.output_feature as usize] = rank - 1;
    let cstrides = strides_of(&canonical.shape.dims);
    let strides: Vec<isize> = axis_of.iter().map(|&a| cstrides[a]).collect();
    let r = super::shape_ops::gather_array(&canonical, 0, &out.dims, &strides)?;
    Ok(Array::new(out.clone(), r.data))
}

/// Sizes and per-dimension window tables of one convolution.
struct Geometry {
    in_batch: usize,
    in_features: usize,
    in_spatial: Vec<usize>,
    kernel_in: usize,
    out_features: usize,
    kernel_spatial: Vec<usize>,
    out_batch: usize,
    out_spatial: Vec<usize>,
    feature_groups: usize,
    batch_groups: usize,
    /// `taps[d][o * K + k]`: input spatial index read by output `o`, kernel tap `k` (None:
    /// padding or a hole of lhs dilation). Kernel reversal is folded in.
    taps: Vec<Vec<Option<usize>>>,
}

impl Geometry {
    fn new(lhs: &Array, rhs: &Array, conv: &Convolution, out: &ArrayShape) -> EvalResult<Geometry> {
        let d = &conv.dims;
        let ns = d.input_spatial.len();
        let dims_ok =
            |list: &[i64], rank: usize| list.iter().all(|&x| x >= 0 && (x as usize) < rank);
        if lhs.shape.rank() != ns + 2
            || rhs.shape.rank() != ns + 2
            || out.rank() != ns + 2
            || d.kernel_spatial.len() != ns
            || d.output_spatial.len() != ns
            || conv.window.dims.len() != ns
            || !dims_ok(&[d.input_batch, d.input_feature], lhs.shape.rank())
            || !dims_ok(&d.input_spatial, lhs.shape.rank())
            || !dims_ok(
                &[d.kernel_input_feature, d.kernel_output_feature],
                rhs.shape.rank(),
            )
            || !dims_ok(&d.kernel_spatial, rhs.shape.rank())
            || !dims_ok(&[d.output_batch, d.output_feature], out.rank())
            || !dims_ok(&d.output_spatial, out.rank())
        {
            return err(format!(
                "convolution dimension numbers do not fit {} * {} -> {out}",
                lhs.shape, rhs.shape
            ));
        }
        let ld = |x: i64| lhs.shape.dims[x as usize] as usize;
        let rd = |x: i64| rhs.shape.dims[x as usize] as usize;
        let od = |x: i64| out.dims[x as usize] as usize;
        let fg = conv.feature_group_count.max(1) as usize;
        let bg = conv.batch_group_count.max(1) as usize;
        let (in_batch, in_features) = (ld(d.input_batch), ld(d.input_feature));
        let (kernel_in, out_features) = (rd(d.kernel_input_feature), rd(d.kernel_output_feature));
        if fg > 1 && bg > 1 {
            return err(
                "convolution: feature_group_count and batch_group_count cannot both exceed 1",
            );
        }
        if in_features % fg != 0 || kernel_in * fg != in_features || out_features % fg != 0 {
            return err(format!(
                "convolution: {in_features} input features, kernel input features {kernel_in}, \
                 {out_features} output features do not fit feature_group_count {fg}"
            ));
        }
        if in_batch % bg != 0 || out_features % bg != 0 {
            return err(format!(
                "convolution: batch {in_batch} and {out_features} output features do not divide by batch_group_count {bg}"
            ));
        }
        let out_batch = in_batch / bg;
        if od(d.output_batch) != out_batch || od(d.output_feature) != out_features {
            return err(format!(
                "convolution output {out} should have batch {out_batch} and {out_features} features"
            ));
        }
        let mut taps = Vec::with_capacity(ns);
        let mut out_spatial = Vec::with_capacity(ns);
        for (i, w) in conv.window.dims.iter().enumerate() {
            let n = ld(d.input_spatial[i]) as i64;
            let k = rd(d.kernel_spatial[i]) as i64;
            if w.size != k || w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 {
                return err(format!(
                    "convolution window dimension {i} (size {}, stride {}) does not fit kernel size {k}",
                    w.size, w.stride
                ));
            }
            let dilated = if n == 0 {
                0
            } else {
                (n - 1) * w.base_dilation + 1
            };
            let padded = dilated + w.pad_low + w.pad_high;
            let span = if k == 0 {
                0
            } else {
                (k - 1) * w.window_dilation + 1
            };
            let o = if padded < span {
                0
            } else {
                (padded - span) / w.stride + 1
            };
            if o != od(d.output_spatial[i]) as i64 {
                return err(format!(
                    "convolution spatial dimension {i} gives {o} outputs, the instruction says {out}"
                ));
            }
            let mut t = Vec::with_capacity((o * k) as usize);
            for oi in 0..o {
                for ki in 0..k {
                    let tap = if w.reversal { k - 1 - ki } else { ki };
                    let p = oi * w.stride + tap * w.window_dilation - w.pad_low;
                    let valid = p >= 0 && p < dilated && p % w.base_dilation == 0;
                    t.push(valid.then(|| (p / w.base_dilation) as usize));
                }
            }
            out_spatial.push(o as usize);
            taps.push(t);
        }
        Ok(Geometry {
            in_batch,
            in_features,
            in_spatial: d.input_spatial.iter().map(|&x| ld(x)).collect(),
            kernel_in,
            out_features,
            kernel_spatial: d.kernel_spatial.iter().map(|&x| rd(x)).collect(),
            out_batch,
            out_spatial,
            feature_groups: fg,
            batch_groups: bg,
            taps,
        })
    }

    fn canonical_shape(&self, out: &ArrayShape) -> ArrayShape {
        let dims: Vec<i64> = std::iter::once(self.out_batch)
            .chain(self.out_spatial.iter().copied())
            .chain(std::iter::once(self.out_features))
            .map(|x| x as i64)
            .collect();
        ArrayShape::new(out.element_type, &dims)
    }

    /// The convolution on canonical layouts: input `[N, S..., C]`, kernel `[K..., Ci, O]`,
    /// result `[N/Bg, S'..., O]`.
    fn run<T: Mac>(&self, input: &[T], kernel: &[T]) -> Vec<T> {
        let ns = self.in_spatial.len();
        let (c, ci, o) = (self.in_features, self.kernel_in, self.out_features);
        let in_strides = strides_of(
            &std::iter::once(self.in_batch)
                .chain(self.in_spatial.iter().copied())
                .chain(std::iter::once(c))
                .map(|x| x as i64)
                .collect::<Vec<_>>(),
        );
        let k_count: usize = self.kernel_spatial.iter().product();
        let out_positions: usize = self.out_spatial.iter().product();
        let groups = self.feature_groups.max(self.batch_groups);
        let group_width = o / groups.max(1);
        let mut out = vec![T::ZERO; self.out_batch * out_positions * o];
        // Input offsets (within one batch element) of every kernel tap of one output position.
        let mut tap_offsets: Vec<Option<usize>> = Vec::with_capacity(k_count);
        let mut opos = vec![0usize; ns];
        for p in 0..out_positions {
            tap_offsets.clear();
            let mut kpos = vec![0usize; ns];
            for _ in 0..k_count {
                let mut off = Some(0usize);
                for dim in 0..ns {
                    let k = self.kernel_spatial[dim];
                    off = match (off, self.taps[dim][opos[dim] * k + kpos[dim]]) {
                        (Some(a), Some(i)) => Some(a + i * in_strides[1 + dim] as usize),
                        _ => None,
                    };
                }
                tap_offsets.push(off);
                advance(&mut kpos, &self.kernel_spatial);
            }
            for b in 0..self.out_batch {
                let row_start = (b * out_positions + p) * o;
                let row = &mut out[row_start..row_start + o];
                for g in 0..groups {
                    let in_b = if self.batch_groups > 1 {
                        g * self.out_batch + b
                    } else {
                        b
                    };
                    let c0 = if self.feature_groups > 1 { g * ci } else { 0 };
                    let (o0, o1) = (g * group_width, (g + 1) * group_width);
                    let base = in_b * in_strides[0] as usize + c0;
                    for (kk, off) in tap_offsets.iter().enumerate() {
                        let Some(off) = off else { continue };
                        let x = &input[base + off..base + off + ci];
                        let kbase = kk * ci * o;
                        for (cc, &a) in x.iter().enumerate() {
                            let krow = &kernel[kbase + cc * o + o0..kbase + cc * o + o1];
                            for (acc, &w) in row[o0..o1].iter_mut().zip(krow) {
                                *acc = T::mac(*acc, a, w);
                            }
                        }
                    }
                }
            }
            advance(&mut opos, &self.out_spatial);
        }
        out
    }
}

/// Advances a row-major index over `dims` (wrapping to zero at the end).
fn advance(index: &mut [usize], dims: &[usize]) {
    for d in (0..dims.len()).rev() {
        index[d] += 1;
        if index[d] < dims[d] {
            return;
        }
        index[d] = 0;
    }
}
