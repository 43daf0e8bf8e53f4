//! Graph ops Keras layers need that the tracing API has no method for: zero padding
//! (`ZeroPadding2D`) and the grouped convolution of `DepthwiseConv2D`. Both are built as one
//! HLO instruction with [`Tracer::with_module`] (the autodiff has rules for both; the
//! compiler's finite-difference checks `zero_padding_of_nhwc_images_as_keras_builds_it` and
//! `depthwise_conv_with_a_channel_multiplier_as_keras_builds_it` cover these forms).

use crate::model::Graph;
use tessel_compiler::ir::{
    ConvDimensionNumbers, Convolution, Instruction, Op, PadDim, Shape, Window, WindowDim,
};
use tessel_compiler::trace::{Padding, Tensor};

/// The fixed dimensions of `x`, or why not.
fn fixed_dims(x: &Tensor, what: &str) -> Result<Vec<i64>, String> {
    x.dims()
        .iter()
        .map(|d| d.fixed())
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| format!("{what} needs fixed dimensions"))
}

/// Adds `op` with `operands` to the entry computation and returns its tensor.
fn emit(
    g: &Graph,
    base: &str,
    op: Op,
    dims: &[i64],
    operands: &[&Tensor],
) -> Result<Tensor, String> {
    let ids: Vec<_> = operands
        .iter()
        .map(|t| {
            t.id()
                .ok_or_else(|| "an operand failed to trace".to_string())
        })
        .collect::<Result<_, _>>()?;
    let ty = operands[0]
        .element_type()
        .ok_or_else(|| "an operand failed to trace".to_string())?;
    let id = g.tracer.with_module(|m, entry| {
        let comp = m.computation_mut(entry);
        let name = format!("keras_{base}.{}", comp.len());
        comp.add(Instruction::new(name, op, Shape::array(ty, dims)), &ids)
    });
    Ok(g.tracer.tensor(id))
}

/// `x` with `low[i]` zeros before and `high[i]` after dimension `i`.
pub(crate) fn zero_pad(g: &Graph, x: &Tensor, low: &[i64], high: &[i64]) -> Result<Tensor, String> {
    let dims = fixed_dims(x, "zero padding")?;
    if low.len() != dims.len() || high.len() != dims.len() || low.iter().chain(high).any(|&p| p < 0)
    {
        return Err(format!(
            "padding {low:?}/{high:?} does not fit an input of rank {}",
            dims.len()
        ));
    }
    let out: Vec<i64> = (0..dims.len())
        .map(|i| dims[i] + low[i] + high[i])
        .collect();
    let zero = x.scalar_like(0.0);
    let pad_dims = (0..dims.len())
        .map(|i| PadDim {
            low: low[i],
            high: high[i],
            interior: 0,
        })
        .collect();
    emit(g, "pad", Op::Pad { dims: pad_dims }, &out, &[x, &zero])
}

/// TF's `depthwise_conv2d`: an NHWC input `[B, H, W, C]` and a filter `[kh, kw, C, M]` give
/// `[B, H', W', C * M]`, output channel `c * M + m` from input channel `c` (a convolution
/// with `feature_group_count = C`).
pub(crate) fn depthwise_conv2d(
    g: &Graph,
    x: &Tensor,
    filter: &Tensor,
    strides: [i64; 2],
    padding: Padding,
) -> Result<Tensor, String> {
    let xd = fixed_dims(x, "depthwise_conv2d")?;
    let fd = fixed_dims(filter, "depthwise_conv2d")?;
    if xd.len() != 4 || fd.len() != 4 || fd[2] != xd[3] {
        return Err(format!(
            "depthwise_conv2d of input {xd:?} (NHWC) with filter {fd:?} ([kh, kw, C, M]): the channels differ or a rank is not 4"
        ));
    }
    let (c, mult) = (fd[2], fd[3]);
    let kernel = filter.reshape(&[fd[0], fd[1], 1, c * mult]);
    let mut window = Vec::new();
    let mut out = vec![xd[0]];
    for k in 0..2 {
        let (o, lo, hi) = padding
            .window_geometry(xd[1 + k], fd[k], strides[k])
            .ok_or_else(|| {
                format!(
                    "depthwise_conv2d: window {:?} with strides {strides:?} does not fit {xd:?}",
                    &fd[..2]
                )
            })?;
        out.push(o);
        window.push(WindowDim {
            stride: strides[k],
            pad_low: lo,
            pad_high: hi,
            ..WindowDim::new(fd[k])
        });
    }
    out.push(c * mult);
    let conv = Convolution {
        window: Window { dims: window },
        dims: ConvDimensionNumbers::nhwc_hwio(),
        feature_group_count: c,
        batch_group_count: 1,
    };
    emit(
        g,
        "depthwise_conv",
        Op::Convolution(conv),
        &out,
        &[x, &kernel],
    )
}
