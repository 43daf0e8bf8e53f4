//! Gradients of a model written with the tracing API, checked by finite differences.

use super::{f32_to_f64_literal, random_inputs, scalar_of, to_f64, with_element};
use crate::interpreter::evaluate;
use crate::ir::ElementType::F32;
use crate::ir::{Array, ArrayData, ArrayShape, Literal};
use crate::trace::{Padding, Tracer};

#[test]
fn traced_cnn_gradients_match_finite_differences() {
    let mut t = Tracer::new("cnn");
    let x = t.parameter("x", &[2, 6, 6, 1], F32);
    let k = t.parameter("k", &[3, 3, 1, 2], F32);
    let w = t.parameter("w", &[18, 3], F32);
    let labels = t.parameter("labels", &[2, 3], F32);
    let h = x.conv2d(&k, [1, 1], Padding::Same).relu();
    let p = h.max_pool([2, 2], [2, 2], Padding::Valid);
    let logits = p.reshape(&[2, 18]).matmul(&w);
    let loss = logits
        .softmax_cross_entropy_with_logits(&labels)
        .reduce_mean(&[0], false);
    let g = t.grad(&loss, &[&k, &w]);
    let module = t
        .finish(&[&loss, &g[0], &g[1]])
        .unwrap_or_else(|e| panic!("{e}"));
    crate::verifier::verify(&module).unwrap_or_else(|e| panic!("{e:?}"));

    let mut inputs = random_inputs(&module, 21, -1.0, 1.0);
    inputs[3] = Literal::Array(Array::new(
        ArrayShape::new(F32, &[2, 3]),
        ArrayData::F32(vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0]),
    ));
    let args: Vec<Literal> = inputs.iter().map(f32_to_f64_literal).collect();
    let m64 = to_f64(&module);
    let out = evaluate(&m64, &args).unwrap();
    let parts = out.as_tuple().unwrap();
    let mut forward = m64.clone();
    let root = forward.entry().root();
    let loss_id = forward.entry().get(root).operand(0);
    forward.entry_mut().set_root(loss_id);
    for (k, param) in [1usize, 2].into_iter().enumerate() {
        let g = parts[k + 1].as_array().unwrap();
        for i in 0..g.len() {
            let h = 1e-5;
            let mut plus = args.clone();
            plus[param] = with_element(&args[param], i, h);
            let mut minus = args.clone();
            minus[param] = with_element(&args[param], i, -h);
            let fd = (scalar_of(&evaluate(&forward, &plus).unwrap())
                - scalar_of(&evaluate(&forward, &minus).unwrap()))
                / (2.0 * h);
            let a = g.data.get_f64(i);
            assert!(
                (a - fd).abs() <= 1e-6 + 1e-5 * fd.abs(),
                "param {param} element {i}: autodiff {a}, finite difference {fd}"
            );
        }
    }
}

#[test]
fn dynamic_dimensions_are_refused_with_the_parameter_named() {
    use crate::trace::Dim;
    let mut t = Tracer::new("dyn");
    let x = t.parameter("x", &[Dim::Unknown, Dim::Fixed(3)], F32);
    let loss = (&x * &x).reduce_sum(&[0, 1], false);
    let g = t.grad(&loss, &[&x]);
    assert!(!g[0].is_ok());
    let issues = t.issues();
    assert!(issues[0].message.contains("dynamic"), "{issues:?}");
}
