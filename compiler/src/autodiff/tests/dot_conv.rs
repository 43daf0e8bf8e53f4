//! Finite-difference checks of dot and convolution in many dimension layouts and windows.

use super::{check, Case};
use crate::ir::{
    ConvDimensionNumbers, Convolution, DotDimensionNumbers, UnaryOp, Window, WindowDim,
};

fn dot_case(lhs: &[i64], rhs: &[i64], dn: DotDimensionNumbers, seed: u64) {
    let mut c = Case::new();
    let a = c.param(lhs);
    let b = c.param(rhs);
    let mut em = c.em();
    let d = em.dot(a, b, dn).unwrap();
    let y = em.unary(UnaryOp::Tanh, d).unwrap();
    check(&c.finish(y), seed, -1.0, 1.0);
}

#[test]
fn dot_matrix_product_and_vector_product() {
    dot_case(
        &[3, 4],
        &[4, 5],
        DotDimensionNumbers {
            lhs_contracting: vec![1],
            rhs_contracting: vec![0],
            ..Default::default()
        },
        1,
    );
    dot_case(
        &[4],
        &[4],
        DotDimensionNumbers {
            lhs_contracting: vec![0],
            rhs_contracting: vec![0],
            ..Default::default()
        },
        2,
    );
}

#[test]
fn dot_with_batch_and_contracting_dims_anywhere() {
    // lhs [c=4, b=2, f=3], rhs [f=5, c=4, b=2] -> [2, 3, 5]
    dot_case(
        &[4, 2, 3],
        &[5, 4, 2],
        DotDimensionNumbers {
            lhs_batch: vec![1],
            rhs_batch: vec![2],
            lhs_contracting: vec![0],
            rhs_contracting: vec![1],
        },
        3,
    );
    // two contracting dims paired out of order: lhs [2,3,4], rhs [4,5,2] -> [3,5]
    dot_case(
        &[2, 3, 4],
        &[4, 5, 2],
        DotDimensionNumbers {
            lhs_contracting: vec![0, 2],
            rhs_contracting: vec![2, 0],
            ..Default::default()
        },
        4,
    );
    // batch only on both, no free dims on the right: lhs [2,3,4] rhs [2,4] -> [2,3]
    dot_case(
        &[2, 3, 4],
        &[2, 4],
        DotDimensionNumbers {
            lhs_batch: vec![0],
            rhs_batch: vec![0],
            lhs_contracting: vec![2],
            rhs_contracting: vec![1],
        },
        5,
    );
}

/// `b01f_01io->b01f` and friends from a label string like JAX prints.
fn labels(spec: &str) -> ConvDimensionNumbers {
    let (lhs, rest) = spec.split_once('_').unwrap();
    let (rhs, out) = rest.split_once("->").unwrap();
    let spatial = |s: &str| -> Vec<i64> {
        let mut v: Vec<(char, i64)> = s
            .chars()
            .enumerate()
            .filter(|(_, ch)| ch.is_ascii_digit())
            .map(|(i, ch)| (ch, i as i64))
            .collect();
        v.sort();
        v.into_iter().map(|(_, i)| i).collect()
    };
    let pos = |s: &str, ch: char| s.find(ch).unwrap() as i64;
    ConvDimensionNumbers {
        input_batch: pos(lhs, 'b'),
        input_feature: pos(lhs, 'f'),
        input_spatial: spatial(lhs),
        kernel_input_feature: pos(rhs, 'i'),
        kernel_output_feature: pos(rhs, 'o'),
        kernel_spatial: spatial(rhs),
        output_batch: pos(out, 'b'),
        output_feature: pos(out, 'f'),
        output_spatial: spatial(out),
    }
}

/// One spatial window dimension: (size, stride, pad_low, pad_high, lhs dilation, rhs dilation).
fn wd(size: i64, stride: i64, low: i64, high: i64, ld: i64, rd: i64) -> WindowDim {
    WindowDim {
        size,
        stride,
        pad_low: low,
        pad_high: high,
        window_dilation: rd,
        base_dilation: ld,
        reversal: false,
    }
}

fn conv_case(spec: &str, lhs: &[i64], rhs: &[i64], window: Vec<WindowDim>, groups: i64, seed: u64) {
    let mut c = Case::new();
    let x = c.param(lhs);
    let w = c.param(rhs);
    let mut em = c.em();
    let conv = Convolution {
        window: Window { dims: window },
        dims: labels(spec),
        feature_group_count: groups,
        batch_group_count: 1,
    };
    let y = em.convolution(x, w, conv).unwrap();
    let y = em.unary(UnaryOp::Sine, y).unwrap();
    check(&c.finish(y), seed, -1.0, 1.0);
}

#[test]
fn conv_same_padding_nhwc_like_the_cnn() {
    conv_case(
        "b01f_01io->b01f",
        &[2, 5, 5, 2],
        &[3, 3, 2, 3],
        vec![wd(3, 1, 1, 1, 1, 1), wd(3, 1, 1, 1, 1, 1)],
        1,
        11,
    );
}

#[test]
fn conv_strided_asymmetric_padding_nchw() {
    conv_case(
        "bf01_oi01->bf01",
        &[2, 3, 6, 5],
        &[2, 3, 2, 3],
        vec![wd(2, 2, 0, 1, 1, 1), wd(3, 1, 2, 0, 1, 1)],
        1,
        12,
    );
}

#[test]
fn conv_with_dilations_and_negative_or_large_padding() {
    conv_case(
        "b01f_01io->b01f",
        &[1, 4, 3, 2],
        &[2, 2, 2, 2],
        vec![wd(2, 1, -1, 2, 2, 2), wd(2, 2, 3, 1, 1, 2)],
        1,
        13,
    );
    conv_case(
        "bf01_oi01->bf01",
        &[1, 2, 5, 4],
        &[2, 2, 3, 2],
        vec![wd(3, 3, 1, -1, 2, 1), wd(2, 1, 0, 0, 3, 1)],
        1,
        14,
    );
}

#[test]
fn conv_with_feature_groups() {
    conv_case(
        "bf01_oi01->bf01",
        &[2, 4, 4, 4],
        &[6, 2, 3, 2],
        vec![wd(3, 1, 1, 1, 1, 1), wd(2, 2, 0, 1, 1, 1)],
        2,
        15,
    );
    // depthwise, strided and dilated, channels last
    conv_case(
        "b01f_01io->b01f",
        &[1, 5, 5, 3],
        &[2, 2, 1, 3],
        vec![wd(2, 2, 1, 0, 1, 2), wd(2, 1, 0, 1, 2, 1)],
        3,
        16,
    );
}

#[test]
fn depthwise_conv_with_a_channel_multiplier_as_keras_builds_it() {
    // Keras's DepthwiseConv2D with depth_multiplier 2 on 3 channels: the [kh, kw, C, M]
    // kernel reshaped to [kh, kw, 1, C * M], one group per input channel; `same` padding
    // with stride 2 on an even size pads one more after than before.
    conv_case(
        "b01f_01io->b01f",
        &[2, 6, 5, 3],
        &[3, 2, 1, 6],
        vec![wd(3, 2, 0, 1, 1, 1), wd(2, 2, 0, 1, 1, 1)],
        3,
        19,
    );
    // valid padding, stride 1, multiplier 3 on 2 channels
    conv_case(
        "b01f_01io->b01f",
        &[1, 4, 4, 2],
        &[2, 3, 1, 6],
        vec![wd(2, 1, 0, 0, 1, 1), wd(3, 1, 0, 0, 1, 1)],
        2,
        20,
    );
}

#[test]
fn conv_1d_with_unusual_layouts() {
    // lhs [W, B, F], kernel [O, W, I], out [F, W, B]
    conv_case(
        "0bf_o0i->f0b",
        &[7, 2, 3],
        &[2, 3, 3],
        vec![wd(3, 3, 2, 1, 1, 1)],
        1,
        17,
    );
}

#[test]
fn conv_with_window_reversal() {
    let mut window = vec![wd(3, 1, 1, 0, 1, 1), wd(2, 1, 0, 1, 1, 1)];
    window[0].reversal = true;
    conv_case(
        "b01f_01io->b01f",
        &[1, 4, 4, 2],
        &[3, 2, 2, 2],
        window,
        1,
        18,
    );
}

#[test]
fn mixed_precision_dot_gives_gradients_in_the_operand_types() {
    use crate::ir::{Array, ArrayData, ArrayShape, ElementType, Literal, Op, Shape};
    use half::bf16;
    let mut c = Case::new();
    let a = c.param_of(ElementType::BF16, &[2, 3]);
    let b = c.param_of(ElementType::BF16, &[3, 2]);
    let dn = DotDimensionNumbers {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        ..Default::default()
    };
    let d = c.em().raw(
        Op::Dot(dn),
        Shape::array(ElementType::F32, &[2, 2]),
        &[a, b],
    );
    let loss = c.em().sum_all(d).unwrap();
    c.module.entry_mut().set_root(loss);
    let grad = crate::autodiff::grad_module(&c.module, &[0, 1]).unwrap();
    crate::verifier::verify(&grad).unwrap_or_else(|e| panic!("{e:?}"));
    let bf = |dims: &[i64], v: &[f32]| {
        Literal::Array(Array::new(
            ArrayShape::new(ElementType::BF16, dims),
            ArrayData::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
        ))
    };
    let av = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let bv = [0.5, -1.0, 2.0, 0.25, -3.0, 1.5];
    let out = crate::interpreter::evaluate(&grad, &[bf(&[2, 3], &av), bf(&[3, 2], &bv)]).unwrap();
    let parts = out.as_tuple().unwrap();
    let ga = parts[1].as_array().unwrap();
    let gb = parts[2].as_array().unwrap();
    assert_eq!(ga.element_type(), ElementType::BF16);
    assert_eq!(gb.element_type(), ElementType::BF16);
    // d sum(A B) / dA[i][k] = sum_j B[k][j]; d / dB[k][j] = sum_i A[i][k]
    for i in 0..2 {
        for k in 0..3 {
            let want = bv[2 * k] + bv[2 * k + 1];
            assert_eq!(ga.data.get_f64(3 * i + k), want as f64);
        }
    }
    for k in 0..3 {
        for j in 0..2 {
            let want = av[k] + av[3 + k];
            assert_eq!(gb.data.get_f64(2 * k + j), want as f64);
        }
    }
}

/// The gradient convolutions keep the forward's `operand_precision` (as JAX's transpose
/// rules do), so a HIGHEST forward does not get DEFAULT gradients that a backend may compute
/// less exactly; without the attribute they have none.
#[test]
fn conv_gradients_keep_the_operand_precision() {
    let text = |attr: &str| {
        format!(
            "HloModule m\n\nENTRY e {{\n  x = f32[1,6,6,2] parameter(0)\n  k = f32[3,3,2,3] parameter(1)\n  \
             c = f32[1,6,6,3] convolution(x, k), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f{attr}\n  \
             z = f32[] constant(0)\n  ROOT s = f32[] reduce(c, z), dimensions={{0,1,2,3}}, to_apply=add\n}}\n\n\
             add {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}}\n"
        )
    };
    for (attr, want) in [
        (
            ", operand_precision={highest,highest}",
            Some("{highest,highest}"),
        ),
        ("", None),
    ] {
        let m = crate::hlo_text::parse_module(&text(attr), None).unwrap();
        let g = crate::autodiff::grad_module(&m, &[0, 1]).unwrap();
        let convs: Vec<Option<&str>> = g
            .entry()
            .instructions()
            .map(|(_, i)| i)
            .filter(|i| matches!(i.op, crate::ir::Op::Convolution(_)))
            .map(|i| {
                i.extra_attrs
                    .iter()
                    .find(|(k, _)| k == "operand_precision")
                    .map(|(_, v)| v.as_str())
            })
            .collect();
        // The forward and its two gradients.
        assert_eq!(convs.len(), 3, "{attr}");
        assert!(convs.iter().all(|&p| p == want), "{attr}: {convs:?}");
    }
}
