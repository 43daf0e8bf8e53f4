//! Gradient of `convolution` for any dimension layout, stride, padding, lhs and rhs dilation,
//! window reversal and feature grouping.
//!
//! Both gradients are convolutions again. The operands are first transposed into one canonical
//! layout (lhs `[B, C, S..]`, kernel `[O, I, S..]`, output `[B, O, S..]`), the gradients are
//! computed there, and transposed back. Per spatial dimension, with input size `N`, kernel
//! size `K`, output size `M`, stride `s`, padding `pl`/`ph`, lhs dilation `ld`, rhs dilation
//! `rd` (the forward output is `out[o] = sum_k in_padded_dilated[o*s + k*rd] * w[k]`):
//!
//! - input gradient: the cotangent convolved with the spatially reversed kernel whose in/out
//!   features are swapped: lhs dilation `s`, rhs dilation `rd`, stride `ld`, padding
//!   `(K-1)*rd - pl` low and `(N-1)*ld + pl - (M-1)*s` high (JAX's `b01f_01oi->b01f` form);
//! - kernel gradient: the input convolved with the cotangent as the kernel, batch and feature
//!   roles exchanged: lhs dilation `ld`, rhs dilation `s`, stride `rd`, padding `pl` low and
//!   `(K-1)*rd + (M-1)*s - (N-1)*ld - pl` high (JAX's `f01b_i01o->01bf` form).
//!
//! With `G` feature groups the kernel's output features are split into `G` groups and moved
//! into its input features (input gradient), and the input's features are split and moved into
//! its batch (kernel gradient), so both gradient convolutions keep `feature_group_count = G`.
//! Negative paddings of the gradient convolutions are turned into extra outputs that a slice
//! removes, so backends only ever see non-negative padding.

use super::emit::{Emitter, R};
use super::{unsupported, Contributions, Node};
use crate::ir::{
    ConvDimensionNumbers, Convolution, InstrId, Instruction, SliceDim, Window, WindowDim,
};

pub(crate) fn vjp(
    em: &mut Emitter,
    node: &Node,
    conv: &Convolution,
    g: InstrId,
) -> R<Contributions> {
    if conv.batch_group_count != 1 {
        return Err(unsupported(
            em,
            node,
            "convolutions with batch_group_count > 1 have no gradient rule",
        ));
    }
    let d = &conv.dims;
    let groups = conv.feature_group_count;
    let perm_lhs = canonical_perm(d.input_batch, d.input_feature, &d.input_spatial);
    let perm_kernel = canonical_perm(
        d.kernel_output_feature,
        d.kernel_input_feature,
        &d.kernel_spatial,
    );
    let perm_out = canonical_perm(d.output_batch, d.output_feature, &d.output_spatial);
    let (lhs, rhs) = (node.operand(0), node.operand(1));
    // Mixed precision: the gradient convolutions run in the operands' type.
    let (lhs_ty, rhs_ty) = (em.element_type(lhs)?, em.element_type(rhs)?);
    let g = em.convert(g, lhs_ty)?;
    let g_c = em.transpose(g, &perm_out)?;
    if em.dims(g_c)?.contains(&0) {
        return Ok(vec![]);
    }
    let mut out = Contributions::new();
    if node.wants(0) {
        let w_c = em.transpose(rhs, &perm_kernel)?;
        let x_dims = em.dims(lhs)?;
        let x_c_dims: Vec<i64> = perm_lhs.iter().map(|&p| x_dims[p as usize]).collect();
        let dx_c = input_gradient(em, g_c, w_c, &x_c_dims, &conv.window, groups, &node.instr)?;
        let dx = em.transpose(dx_c, &inverse(&perm_lhs))?;
        out.extend(node.to_operand(0, em.convert(dx, lhs_ty)?));
    }
    if node.wants(1) {
        let x_c = em.transpose(lhs, &perm_lhs)?;
        let w_dims = em.dims(rhs)?;
        let w_c_dims: Vec<i64> = perm_kernel.iter().map(|&p| w_dims[p as usize]).collect();
        let dw_c = kernel_gradient(em, x_c, g_c, &w_c_dims, &conv.window, groups, &node.instr)?;
        let dw = em.transpose(dw_c, &inverse(&perm_kernel))?;
        out.extend(node.to_operand(1, em.convert(dw, rhs_ty)?));
    }
    Ok(out)
}

/// `[a, b, spatial...]` as a transpose permutation into the canonical layout.
fn canonical_perm(a: i64, b: i64, spatial: &[i64]) -> Vec<i64> {
    let mut p = vec![a, b];
    p.extend_from_slice(spatial);
    p
}

fn inverse(perm: &[i64]) -> Vec<i64> {
    let mut inv = vec![0i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as i64;
    }
    inv
}

/// Dimension numbers `[0, 1, 2..]` roles given by the three role pairs.
fn numbers(
    lhs: (i64, i64),
    kernel: (i64, i64),
    out: (i64, i64),
    spatial_rank: usize,
) -> ConvDimensionNumbers {
    let sp: Vec<i64> = (2..2 + spatial_rank as i64).collect();
    ConvDimensionNumbers {
        input_batch: lhs.0,
        input_feature: lhs.1,
        input_spatial: sp.clone(),
        kernel_input_feature: kernel.0,
        kernel_output_feature: kernel.1,
        kernel_spatial: sp.clone(),
        output_batch: out.0,
        output_feature: out.1,
        output_spatial: sp,
    }
}

/// d loss / d input in the canonical layout `[B, C, N..]`.
fn input_gradient(
    em: &mut Emitter,
    g_c: InstrId,
    w_c: InstrId,
    x_c_dims: &[i64],
    window: &Window,
    groups: i64,
    forward: &Instruction,
) -> R<InstrId> {
    let ns = window.dims.len();
    let m_dims = em.dims(g_c)?;
    // Reverse the kernel where the forward did not (a forward reversal cancels ours).
    let flip: Vec<i64> = (0..ns)
        .filter(|&i| !window.dims[i].reversal)
        .map(|i| 2 + i as i64)
        .collect();
    let mut kernel = em.reverse(w_c, &flip)?;
    let w_dims = em.dims(kernel)?;
    if groups > 1 {
        // [O, Cg, K..] -> [G, Og, Cg, K..] -> [Og, G, Cg, K..] -> [Og, G*Cg, K..]
        let (o, cg) = (w_dims[0], w_dims[1]);
        let k = &w_dims[2..];
        let mut split = vec![groups, o / groups, cg];
        split.extend_from_slice(k);
        kernel = em.reshape(kernel, &split)?;
        let mut perm = vec![1, 0, 2];
        perm.extend((3..3 + ns as i64).collect::<Vec<_>>());
        kernel = em.transpose(kernel, &perm)?;
        let mut merged = vec![o / groups, groups * cg];
        merged.extend_from_slice(k);
        kernel = em.reshape(kernel, &merged)?;
    }
    let mut dims = Vec::with_capacity(ns);
    let mut sizes = Vec::with_capacity(ns);
    for (i, w) in window.dims.iter().enumerate() {
        let n = x_c_dims[2 + i];
        let m = m_dims[2 + i];
        let k = w.size;
        dims.push(WindowDim {
            size: k,
            stride: w.base_dilation,
            pad_low: (k - 1) * w.window_dilation - w.pad_low,
            pad_high: (n - 1) * w.base_dilation + w.pad_low - (m - 1) * w.stride,
            window_dilation: w.window_dilation,
            base_dilation: w.stride,
            reversal: false,
        });
        sizes.push(n);
    }
    let conv = Convolution {
        window: Window { dims },
        // lhs [B, O, M..]; kernel [in = O/G, out = C, K..]; out [B, C, N..]
        dims: numbers((0, 1), (0, 1), (0, 1), ns),
        feature_group_count: groups,
        batch_group_count: 1,
    };
    convolution_nonneg(em, g_c, kernel, conv, &sizes, forward)
}

/// d loss / d kernel in the canonical layout `[O, Cg, K..]`.
fn kernel_gradient(
    em: &mut Emitter,
    x_c: InstrId,
    g_c: InstrId,
    w_c_dims: &[i64],
    window: &Window,
    groups: i64,
    forward: &Instruction,
) -> R<InstrId> {
    let ns = window.dims.len();
    let x_dims = em.dims(x_c)?;
    let m_dims = em.dims(g_c)?;
    let mut lhs = x_c;
    if groups > 1 {
        // [B, G*Cg, N..] -> [B, G, Cg, N..] -> [G, B, Cg, N..] -> [G*B, Cg, N..]
        let (b, c) = (x_dims[0], x_dims[1]);
        let n = &x_dims[2..];
        let mut split = vec![b, groups, c / groups];
        split.extend_from_slice(n);
        lhs = em.reshape(lhs, &split)?;
        let mut perm = vec![1, 0, 2];
        perm.extend((3..3 + ns as i64).collect::<Vec<_>>());
        lhs = em.transpose(lhs, &perm)?;
        let mut merged = vec![groups * b, c / groups];
        merged.extend_from_slice(n);
        lhs = em.reshape(lhs, &merged)?;
    }
    let mut dims = Vec::with_capacity(ns);
    let mut sizes = Vec::with_capacity(ns);
    for (i, w) in window.dims.iter().enumerate() {
        let n = x_dims[2 + i];
        let m = m_dims[2 + i];
        let k = w_c_dims[2 + i];
        dims.push(WindowDim {
            size: m,
            stride: w.window_dilation,
            pad_low: w.pad_low,
            pad_high: (k - 1) * w.window_dilation + (m - 1) * w.stride
                - (n - 1) * w.base_dilation
                - w.pad_low,
            window_dilation: w.stride,
            base_dilation: w.base_dilation,
            reversal: false,
        });
        sizes.push(k);
    }
    let conv = Convolution {
        window: Window { dims },
        // lhs [feature = G*B, batch = Cg, N..]; kernel g [in = B, out = O, M..];
        // out [feature = O, batch = Cg, K..]
        dims: numbers((1, 0), (0, 1), (1, 0), ns),
        feature_group_count: groups,
        batch_group_count: 1,
    };
    let dw = convolution_nonneg(em, lhs, g_c, conv, &sizes, forward)?;
    let flip: Vec<i64> = (0..ns)
        .filter(|&i| window.dims[i].reversal)
        .map(|i| 2 + i as i64)
        .collect();
    em.reverse(dw, &flip)
}

/// A convolution whose spatial output sizes must be `sizes`, with any negative padding
/// replaced by extra outputs (a whole number of strides) that are sliced off afterwards. It
/// keeps the `forward` convolution's `operand_precision`, so a HIGHEST forward gets HIGHEST
/// gradients (backends may use a less exact algorithm at DEFAULT).
fn convolution_nonneg(
    em: &mut Emitter,
    lhs: InstrId,
    rhs: InstrId,
    mut conv: Convolution,
    sizes: &[i64],
    forward: &Instruction,
) -> R<InstrId> {
    let mut skip = Vec::with_capacity(sizes.len());
    for w in conv.window.dims.iter_mut() {
        let mut t = 0;
        if w.pad_low < 0 {
            t = (-w.pad_low + w.stride - 1) / w.stride;
            w.pad_low += t * w.stride;
        }
        if w.pad_high < 0 {
            let u = (-w.pad_high + w.stride - 1) / w.stride;
            w.pad_high += u * w.stride;
        }
        skip.push(t);
    }
    let out_spatial = conv.dims.output_spatial.clone();
    let full = em.convolution(lhs, rhs, conv)?;
    em.copy_attr(forward, "operand_precision", full);
    let full_dims = em.dims(full)?;
    let mut slices: Vec<SliceDim> = full_dims
        .iter()
        .map(|&n| SliceDim {
            start: 0,
            limit: n,
            stride: 1,
        })
        .collect();
    for (i, &d) in out_spatial.iter().enumerate() {
        let d = d as usize;
        if full_dims[d] < skip[i] + sizes[i] {
            return Err(super::AutodiffError::new(format!(
                "internal: gradient convolution gives {} outputs in spatial dimension {}, expected at least {}",
                full_dims[d],
                i,
                skip[i] + sizes[i]
            )));
        }
        slices[d] = SliceDim {
            start: skip[i],
            limit: skip[i] + sizes[i],
            stride: 1,
        };
    }
    em.slice(full, &slices)
}
