//! `convolution` with dimension labels, windows, dilations and feature/batch groups
//! (XLA's rules).

use super::util::{
    check_dimension_list, dim, err, expect_array, expect_operands, list, make_array, Result,
};
use super::window::{check_window, window_output_dim, window_text};
use crate::ir::{ConvDimensionNumbers, Convolution, Shape};

/// `b01f_01io->b01f`, for messages.
pub(crate) fn dim_labels_text(dn: &ConvDimensionNumbers) -> String {
    fn labels(rank: usize, named: &[(i64, char)], spatial: &[i64]) -> String {
        let mut out = vec!['?'; rank];
        for &(d, c) in named {
            if let Some(slot) = out.get_mut(d as usize) {
                *slot = c;
            }
        }
        for (i, &d) in spatial.iter().enumerate() {
            if let Some(slot) = out.get_mut(d as usize) {
                *slot = char::from_digit(i as u32, 36).unwrap_or('?');
            }
        }
        out.into_iter().collect()
    }
    let rank = dn.input_spatial.len() + 2;
    format!(
        "{}_{}->{}",
        labels(
            rank,
            &[(dn.input_batch, 'b'), (dn.input_feature, 'f')],
            &dn.input_spatial
        ),
        labels(
            rank,
            &[
                (dn.kernel_input_feature, 'i'),
                (dn.kernel_output_feature, 'o')
            ],
            &dn.kernel_spatial
        ),
        labels(
            rank,
            &[(dn.output_batch, 'b'), (dn.output_feature, 'f')],
            &dn.output_spatial
        ),
    )
}

pub(crate) fn convolution(conv: &Convolution, operands: &[&Shape]) -> Result<Shape> {
    let name = "convolution";
    expect_operands(name, operands, 2)?;
    let lhs = expect_array(name, "the input (lhs)", operands[0])?;
    let rhs = expect_array(name, "the kernel (rhs)", operands[1])?;
    let both = list(operands);
    let dn = &conv.dims;
    let labels = dim_labels_text(dn);
    let spatial = dn.input_spatial.len();
    let rank = spatial + 2;

    if lhs.element_type != rhs.element_type {
        return err(format!(
            "convolution: operand element types differ: {both}; convert one operand first"
        ));
    }
    if dn.kernel_spatial.len() != spatial || dn.output_spatial.len() != spatial {
        return err(format!(
            "convolution: dim_labels={labels} name different numbers of spatial dimensions"
        ));
    }
    if lhs.rank() != rank || rhs.rank() != rank {
        return err(format!(
            "convolution: dim_labels={labels} describe rank-{rank} operands, got {both}"
        ));
    }
    let input: Vec<i64> = [dn.input_batch, dn.input_feature]
        .into_iter()
        .chain(dn.input_spatial.iter().copied())
        .collect();
    let kernel: Vec<i64> = [dn.kernel_input_feature, dn.kernel_output_feature]
        .into_iter()
        .chain(dn.kernel_spatial.iter().copied())
        .collect();
    let output: Vec<i64> = [dn.output_batch, dn.output_feature]
        .into_iter()
        .chain(dn.output_spatial.iter().copied())
        .collect();
    let label_err = |what: &str| format!("convolution: dim_labels={labels}: {what}");
    check_dimension_list(name, "input dimension", &input, rank, operands[0])
        .map_err(|e| super::ShapeError::new(label_err(&e.message)))?;
    check_dimension_list(name, "kernel dimension", &kernel, rank, operands[1])
        .map_err(|e| super::ShapeError::new(label_err(&e.message)))?;
    let out_placeholder = Shape::array(lhs.element_type, &vec![0; rank]);
    check_dimension_list(name, "output dimension", &output, rank, &out_placeholder)
        .map_err(|e| super::ShapeError::new(label_err(&e.message)))?;

    check_window(name, &conv.window)?;
    if conv.window.dims.len() != spatial {
        return err(format!(
            "convolution: {} has {} dimensions but dim_labels={labels} has {spatial} spatial \
             dimensions",
            window_text(&conv.window),
            conv.window.dims.len()
        ));
    }

    let fgc = conv.feature_group_count;
    let bgc = conv.batch_group_count;
    if fgc < 1 || bgc < 1 {
        return err(format!(
            "convolution: feature_group_count={fgc} and batch_group_count={bgc} must be positive"
        ));
    }
    if fgc > 1 && bgc > 1 {
        return err(format!(
            "convolution: feature_group_count={fgc} and batch_group_count={bgc} cannot both \
             exceed 1"
        ));
    }
    let batch = dim(lhs, dn.input_batch as usize);
    let in_features = lhs.dims[dn.input_feature as usize];
    let kernel_in = rhs.dims[dn.kernel_input_feature as usize];
    let kernel_out = dim(rhs, dn.kernel_output_feature as usize);
    let known = |x: i64| x != crate::ir::UNKNOWN_DIM;

    if known(in_features) && in_features % fgc != 0 {
        return err(format!(
            "convolution: input features ({in_features}, dimension {} of {}) must be divisible \
             by feature_group_count={fgc}",
            dn.input_feature,
            list(&operands[..1])
        ));
    }
    if known(in_features) && known(kernel_in) && in_features / fgc != kernel_in {
        return err(format!(
            "convolution: input features ({in_features}) / feature_group_count ({fgc}) must \
             equal the kernel's input features ({kernel_in}); operands {both}, \
             dim_labels={labels}"
        ));
    }
    if known(kernel_out.0) && kernel_out.0 % fgc != 0 {
        return err(format!(
            "convolution: kernel output features ({}) must be divisible by \
             feature_group_count={fgc}; operands {both}",
            kernel_out.0
        ));
    }
    if known(batch.0) && batch.0 % bgc != 0 {
        return err(format!(
            "convolution: input batch ({}) must be divisible by batch_group_count={bgc}; \
             operands {both}",
            batch.0
        ));
    }
    if known(kernel_out.0) && kernel_out.0 % bgc != 0 {
        return err(format!(
            "convolution: kernel output features ({}) must be divisible by \
             batch_group_count={bgc}; operands {both}",
            kernel_out.0
        ));
    }

    let mut out = vec![(0i64, false); rank];
    out[dn.output_batch as usize] = if known(batch.0) {
        (batch.0 / bgc, batch.1)
    } else {
        batch
    };
    out[dn.output_feature as usize] = kernel_out;
    for (i, w) in conv.window.dims.iter().enumerate() {
        let k = rhs.dims[dn.kernel_spatial[i] as usize];
        if known(k) && k != w.size {
            return err(format!(
                "convolution: {} gives size {} for spatial dimension {i}, but the kernel has \
                 {k} there; operands {both}, dim_labels={labels}",
                window_text(&conv.window),
                w.size
            ));
        }
        let base = dim(lhs, dn.input_spatial[i] as usize);
        out[dn.output_spatial[i] as usize] = window_output_dim(name, base, w, i)?;
    }
    Ok(Shape::Array(make_array(lhs.element_type, &out)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ElementType::{self, *};
    use crate::ir::{Window, WindowDim};

    fn s(t: ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    /// `b01f_01io->b01f` (NHWC input, HWIO kernel).
    fn nhwc() -> ConvDimensionNumbers {
        ConvDimensionNumbers::nhwc_hwio()
    }

    fn window(size: i64, pad: i64) -> Window {
        let d = WindowDim {
            pad_low: pad,
            pad_high: pad,
            ..WindowDim::new(size)
        };
        Window {
            dims: vec![d.clone(), d],
        }
    }

    fn conv(size: i64, pad: i64) -> Convolution {
        Convolution {
            window: window(size, pad),
            dims: nhwc(),
            feature_group_count: 1,
            batch_group_count: 1,
        }
    }

    #[test]
    fn same_padding_convolution() {
        let x = s(F32, &[8, 28, 28, 1]);
        let k = s(F32, &[5, 5, 1, 32]);
        assert_eq!(
            convolution(&conv(5, 2), &[&x, &k]).unwrap(),
            s(F32, &[8, 28, 28, 32])
        );
        assert_eq!(dim_labels_text(&nhwc()), "b01f_01io->b01f");
    }

    #[test]
    fn weight_gradient_layout() {
        // f01b_i01o->01bf, as JAX writes the kernel gradient of a convolution.
        let dn = ConvDimensionNumbers {
            input_batch: 3,
            input_feature: 0,
            input_spatial: vec![1, 2],
            kernel_input_feature: 0,
            kernel_output_feature: 3,
            kernel_spatial: vec![1, 2],
            output_batch: 2,
            output_feature: 3,
            output_spatial: vec![0, 1],
        };
        let c = Convolution {
            window: window(14, 2),
            dims: dn,
            feature_group_count: 1,
            batch_group_count: 1,
        };
        let x = s(F32, &[8, 14, 14, 32]);
        let g = s(F32, &[8, 14, 14, 64]);
        assert_eq!(convolution(&c, &[&x, &g]).unwrap(), s(F32, &[5, 5, 32, 64]));
    }

    #[test]
    fn feature_mismatch_names_both_shapes() {
        let x = s(F32, &[8, 28, 28, 3]);
        let k = s(F32, &[5, 5, 1, 32]);
        let e = convolution(&conv(5, 2), &[&x, &k]).unwrap_err();
        assert!(e.message.contains("input features (3)"), "{e}");
        assert!(
            e.message.contains("f32[8,28,28,3] and f32[5,5,1,32]"),
            "{e}"
        );
        let e = convolution(&conv(3, 1), &[&s(F32, &[8, 28, 28, 1]), &k]).unwrap_err();
        assert!(e.message.contains("kernel has 5"), "{e}");
        let e = convolution(&conv(5, 2), &[&s(F32, &[8, 28, 1]), &k]).unwrap_err();
        assert!(e.message.contains("rank-4"), "{e}");
    }

    #[test]
    fn groups() {
        // Depthwise: 8 input features, 8 groups, kernel input features 1.
        let mut c = conv(3, 1);
        c.feature_group_count = 8;
        let x = s(F32, &[2, 10, 10, 8]);
        let k = s(F32, &[3, 3, 1, 16]);
        assert_eq!(
            convolution(&c, &[&x, &k]).unwrap(),
            s(F32, &[2, 10, 10, 16])
        );
        c.feature_group_count = 3;
        assert!(convolution(&c, &[&x, &k]).is_err());
        let mut b = conv(3, 1);
        b.batch_group_count = 2;
        let k = s(F32, &[3, 3, 8, 4]);
        assert_eq!(convolution(&b, &[&x, &k]).unwrap(), s(F32, &[1, 10, 10, 4]));
        b.feature_group_count = 2;
        assert!(convolution(&b, &[&x, &k]).is_err());
    }
}
