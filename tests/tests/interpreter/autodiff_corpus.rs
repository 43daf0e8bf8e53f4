//! Gradients of the JAX corpus modules against JAX's own `jax.grad` results, and through a
//! JAX `fori_loop` against the gradient worked out by hand.

use std::path::Path;
use tessel_compiler::autodiff::grad_module;
use tessel_compiler::builder::Builder;
use tessel_compiler::hlo_text::{parse_module, parse_module_file, print_module, PrintOptions};
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{
    Array, ArrayData, BinaryOp, Computation, ElementType, Literal, Module, Op, Shape,
};
use tessel_compiler::verifier::verify;
use tessel_runtime::host_io::read_safetensors;

/// The tensors of a safetensors file keyed "0", "1", ... in numeric order.
fn numbered(path: &Path) -> Vec<Array> {
    let mut tensors = read_safetensors(path).unwrap_or_else(|e| panic!("{e}"));
    tensors.sort_by_key(|(k, _)| k.parse::<usize>().expect("numeric key"));
    for (i, (k, _)) in tensors.iter().enumerate() {
        assert_eq!(k, &i.to_string(), "{}: keys are 0..n", path.display());
    }
    tensors.into_iter().map(|(_, a)| a).collect()
}

fn assert_close(name: &str, what: usize, got: &Array, want: &Array) {
    assert_eq!(
        got.shape.dims, want.shape.dims,
        "{name} output {what} shape"
    );
    let mut worst = 0.0f64;
    for i in 0..want.len() {
        let (a, b) = (got.data.get_f64(i), want.data.get_f64(i));
        let excess = (a - b).abs() - (1e-5 + 1e-4 * b.abs());
        assert!(
            excess <= 0.0,
            "{name} output {what} element {i}: tessel {a}, JAX {b}"
        );
        worst = worst.max((a - b).abs());
    }
    eprintln!("{name} output {what}: max |difference| {worst:e}");
}

fn check_against_jax(name: &str, wrt: &[u32]) {
    let dir = tessel_tests::corpus_dir().expect("tests/corpus/conformance is missing");
    let module = parse_module_file(&dir.join(format!("{name}.hlo"))).unwrap();
    let inputs: Vec<Literal> = numbered(&dir.join(format!("{name}.inputs.safetensors")))
        .into_iter()
        .map(Literal::Array)
        .collect();
    let expected = numbered(&dir.join(format!("{name}.grad_outputs.safetensors")));
    assert_eq!(expected.len(), wrt.len() + 1);

    let grad = grad_module(&module, wrt).unwrap_or_else(|e| panic!("{name}: {e}"));
    verify(&grad).unwrap_or_else(|e| panic!("{name}: gradient module does not verify: {e:?}"));
    let out = evaluate(&grad, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    let leaves = out.leaves();
    assert_eq!(leaves.len(), expected.len());
    for (i, (got, want)) in leaves.iter().zip(&expected).enumerate() {
        assert_close(name, i, got, want);
    }

    // What `tessel grad` prints is HLO that reads back into the same computation.
    let text = print_module(&grad, &PrintOptions::default());
    let reparsed = parse_module(&text, Some("grad.hlo")).unwrap_or_else(|e| panic!("{e}"));
    let again = evaluate(&reparsed, &inputs).unwrap();
    assert_eq!(
        again, out,
        "{name}: printed gradient module computes the same"
    );
}

#[test]
fn softmax_cross_entropy_gradient_matches_jax() {
    check_against_jax("grad_softmax_xent", &[0, 1]);
}

#[test]
fn conv_relu_maxpool_gradient_matches_jax() {
    check_against_jax("grad_pool_conv", &[0, 1]);
}

/// `fori_loop_sin` (x <- 0.5 x + sin x, ten times, through a `call`) with the loss
/// `sum(x_10^2)`: the gradient is `2 x_10 * prod_k (0.5 + cos x_k)` elementwise.
#[test]
fn jax_fori_loop_gradient_matches_the_chain_rule() {
    let dir = tessel_tests::corpus_dir().expect("tests/corpus/conformance is missing");
    let mut m: Module = parse_module_file(&dir.join("fori_loop_sin.hlo")).unwrap();
    let f32s = Shape::scalar(ElementType::F32);
    let name = m.unique_name("add_region");
    let add = m.add_computation(Computation::new(name));
    {
        let mut b = Builder::new(&mut m, add);
        let x = b.add_with_shape(Op::Parameter(0), f32s.clone(), &[]);
        let y = b.add_with_shape(Op::Parameter(1), f32s.clone(), &[]);
        b.add_with_shape(Op::Binary(BinaryOp::Add), f32s.clone(), &[x, y]);
    }
    let entry = m.entry;
    let root = m.entry().root();
    let root_shape = m.entry().get(root).shape.clone();
    let mut b = Builder::new(&mut m, entry);
    let sq = b.add_with_shape(Op::Binary(BinaryOp::Multiply), root_shape, &[root, root]);
    let zero = b.add_with_shape(
        Op::Constant(Literal::Array(Array::scalar_f32(0.0))),
        f32s.clone(),
        &[],
    );
    let loss = b.add_with_shape(
        Op::Reduce {
            dimensions: vec![0],
            to_apply: add,
        },
        f32s,
        &[sq, zero],
    );
    m.entry_mut().set_root(loss);

    let x0 = [0.3f64, -1.2, 2.0, 0.9];
    let input = Literal::Array(Array::new(
        tessel_compiler::ir::ArrayShape::new(ElementType::F32, &[4]),
        ArrayData::F32(x0.iter().map(|&v| v as f32).collect()),
    ));
    let grad = grad_module(&m, &[0]).unwrap();
    verify(&grad).unwrap_or_else(|e| panic!("{e:?}"));
    let out = evaluate(&grad, &[input]).unwrap();
    let g = out.as_tuple().unwrap()[1].as_array().unwrap().clone();
    for (i, &x) in x0.iter().enumerate() {
        // Round each step to f32 as the module does, differentiate in f64.
        let (mut v, mut d) = (x as f32 as f64, 1.0);
        for _ in 0..10 {
            d *= 0.5 + v.cos();
            v = (0.5 * v + v.sin()) as f32 as f64;
        }
        let want = 2.0 * v * d;
        let got = g.data.get_f64(i);
        assert!(
            (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "element {i}: tessel {got}, chain rule {want}"
        );
    }
}

/// The guide's MNIST CNN's training step: tessel differentiates the forward half of JAX's module (its
/// loss, element 8 of the root) w.r.t. the eight weights, and one SGD step with JAX's learning
/// rate must give the new weights JAX computed with its own gradients.
#[test]
fn cnn_train_step_gradients_reproduce_jax_sgd_update() {
    use tessel_compiler::autodiff::gradients;
    let dir = tessel_tests::corpus_dir().expect("tests/corpus/conformance is missing");
    let name = "mnist_cnn_train_step_b8";
    let mut m = parse_module_file(&dir.join(format!("{name}.hlo"))).unwrap();
    let inputs: Vec<Literal> = numbered(&dir.join(format!("{name}.inputs.safetensors")))
        .into_iter()
        .map(Literal::Array)
        .collect();
    let expected = numbered(&dir.join(format!("{name}.outputs.safetensors")));
    let entry = m.entry;
    let root = m.entry().root();
    let loss = m.entry().get(root).operand(8);
    let params: Vec<_> = (0..8).map(|i| m.entry().parameter(i).unwrap()).collect();
    let grads = gradients(&mut m, entry, loss, &params).unwrap_or_else(|e| panic!("{e}"));
    let mut outputs = vec![loss];
    outputs.extend(grads);
    let shapes = outputs
        .iter()
        .map(|&o| m.entry().get(o).shape.clone())
        .collect();
    let new_root =
        Builder::new(&mut m, entry).add_with_shape(Op::Tuple, Shape::Tuple(shapes), &outputs);
    m.entry_mut().set_root(new_root);
    verify(&m).unwrap_or_else(|e| panic!("{e:?}"));
    let out = evaluate(&m, &inputs).unwrap_or_else(|e| panic!("{e}"));
    let leaves = out.leaves();
    assert_close(name, 8, leaves[0], &expected[8]);
    let lr = 0.05;
    for i in 0..8 {
        let p = inputs[i].as_array().unwrap();
        let g = leaves[i + 1];
        let updated: Vec<f32> = (0..p.len())
            .map(|k| (p.data.get_f64(k) - lr * g.data.get_f64(k)) as f32)
            .collect();
        let updated = Array::new(p.shape.clone(), ArrayData::F32(updated));
        assert_close(name, i, &updated, &expected[i]);
    }
}
