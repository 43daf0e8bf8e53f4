//! The suite's sequence layers against references computed here: `conv1d` (forward against
//! a direct sum, gradients against central differences), `embedding` (rows read, and its
//! scatter-add gradient summed by hand, repeated ids included), `global_max_pooling` and
//! `global_average_pooling` (forward, and the max's gradient by differences); and each one's
//! input errors.

use crate::support::{assert_close, random_array, run, scalar_step, values};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Module};
use tessel_compiler::trace::Tensor;
use tessel_estimator::model::layers::{
    conv1d, embedding, global_average_pooling, global_max_pooling, Activation, Conv1d, Embedding,
    LayerError, Padding,
};
use tessel_estimator::model::{Graph, Initializer, Mode};
use tessel_runtime::session::Device;

/// Traces `build` on a parameter `x` of `x`'s shape and type; returns the module, its
/// arguments (step, x, the variables' initial values) and those values by name.
fn trace(
    x: &Array,
    build: impl FnOnce(&mut Graph, &Tensor) -> Vec<Tensor>,
) -> (Module, Vec<Array>, Vec<(String, Array)>) {
    let mut g = Graph::new("layer", Mode::Train, Some(42));
    let input = g
        .tracer
        .parameter("x", x.shape.dims.as_slice(), x.shape.element_type);
    let outs = build(&mut g, &input);
    let init = g.variables.initial_values().expect("initial values");
    let named = g
        .variables
        .all()
        .map(|(_, v)| v.name.clone())
        .zip(init.iter().cloned())
        .collect();
    let refs: Vec<&Tensor> = outs.iter().collect();
    let module = g.tracer.finish(&refs).expect("traces");
    let mut args = vec![scalar_step(3), x.clone()];
    args.extend(init);
    (module, args, named)
}

fn var(named: &[(String, Array)], name: &str) -> Vec<f64> {
    values(&named.iter().find(|(n, _)| n == name).expect(name).1)
}

/// Both backends' outputs against `reference`.
fn check_both(module: &Module, args: &[Array], reference: &[Vec<f64>], tol: f64) {
    for (name, device) in [
        ("interpreter", Device::interpreter()),
        ("jit", Device::jit()),
    ] {
        let out = run(module, &device, args.to_vec());
        assert_eq!(out.len(), reference.len(), "{name}: outputs");
        for (i, (o, r)) in out.iter().zip(reference).enumerate() {
            assert_close(&format!("{name} output {i}"), &values(o), r, tol);
        }
    }
}

/// NWC x WIO convolution plus bias, TF's padding (SAME pads the extra column at the end).
#[allow(clippy::too_many_arguments)]
fn conv1d_reference(
    x: &[f64],
    [n, w, c]: [usize; 3],
    k: &[f64],
    [kw, f]: [usize; 2],
    bias: &[f64],
    stride: usize,
    padding: Padding,
) -> Vec<f64> {
    let (ow, pad) = match padding {
        Padding::Valid => ((w - kw) / stride + 1, 0),
        Padding::Same => {
            let ow = w.div_ceil(stride);
            (ow, ((ow - 1) * stride + kw).saturating_sub(w) / 2)
        }
    };
    let mut out = vec![0.0; n * ow * f];
    for b in 0..n {
        for j in 0..ow {
            for o in 0..f {
                let mut s = bias[o];
                for dj in 0..kw {
                    let xx = (j * stride + dj) as i64 - pad as i64;
                    if xx < 0 || xx >= w as i64 {
                        continue;
                    }
                    for ci in 0..c {
                        s += x[(b * w + xx as usize) * c + ci] * k[(dj * c + ci) * f + o];
                    }
                }
                out[(b * ow + j) * f + o] = s;
            }
        }
    }
    out
}

#[test]
fn conv1d_matches_a_direct_sum() {
    for (stride, padding) in [(1, Padding::Valid), (2, Padding::Same), (3, Padding::Valid)] {
        let x = random_array(&[2, 11, 3], ElementType::F32, 5);
        let (module, args, named) = trace(&x, |g, x| {
            let options = Conv1d {
                strides: stride,
                padding,
                bias_initializer: Initializer::RandomUniform {
                    min: -1.0,
                    max: 1.0,
                },
                ..Conv1d::default()
            };
            vec![conv1d(g, x, 4, 3, options).unwrap()]
        });
        assert_eq!(
            named.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["conv1d/kernel", "conv1d/bias"]
        );
        let reference = conv1d_reference(
            &values(&x),
            [2, 11, 3],
            &var(&named, "conv1d/kernel"),
            [3, 4],
            &var(&named, "conv1d/bias"),
            stride as usize,
            padding,
        );
        check_both(&module, &args, &[reference], 1e-5);
    }
}

/// `loss = sum(build(x) * r)` and its gradients with respect to x and every trainable
/// variable, in f64 on the interpreter, against central differences at a spread of elements.
fn check_gradients(x: Array, build: impl FnOnce(&mut Graph, &Tensor) -> Tensor) {
    let mut g = Graph::new("grad", Mode::Train, Some(3));
    let input = g
        .tracer
        .parameter("x", x.shape.dims.as_slice(), ElementType::F64);
    let y = build(&mut g, &input);
    let y_dims: Vec<i64> = y.shape().expect("traced").dims.as_slice().to_vec();
    let r = g
        .tracer
        .constant(random_array(&y_dims, ElementType::F64, 12));
    let loss = (&y * &r).reduce_sum(&[], false);
    let mut params = vec![input.clone()];
    // Parameter numbers: the step is 0, x is 1, the variables follow in creation order.
    let mut numbers = vec![1];
    for (id, v) in g.variables.all().filter(|(_, v)| v.trainable) {
        params.push(v.tensor.clone());
        numbers.push(2 + id.0);
    }
    let refs: Vec<&Tensor> = params.iter().collect();
    let grads = g.tracer.grad(&loss, &refs);
    let mut outs = vec![&loss];
    outs.extend(grads.iter());
    let init = g.variables.initial_values().unwrap();
    let module = g.tracer.finish(&outs).expect("traces");
    let mut args = vec![scalar_step(5), x];
    args.extend(init);
    let out = run(&module, &Device::interpreter(), args.clone());
    for (i, &p) in numbers.iter().enumerate() {
        let analytic = values(&out[1 + i]);
        let n = analytic.len();
        for k in (0..n).step_by((n / 15).max(1)) {
            let eps = 1e-6;
            let at = |delta: f64| {
                let mut a = args.clone();
                let shifted = ArrayData::from_f64_fn(ElementType::F64, a[p].len(), |j| {
                    a[p].data.get_f64(j) + if j == k { delta } else { 0.0 }
                });
                a[p] = Array::new(a[p].shape.clone(), shifted);
                values(&run(&module, &Device::interpreter(), a)[0])[0]
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
            assert!(
                (numeric - analytic[k]).abs() <= 1e-6 * numeric.abs().max(1.0),
                "gradient {i}[{k}]: analytic {} vs numeric {numeric}",
                analytic[k]
            );
        }
    }
}

#[test]
fn conv1d_gradients_match_finite_differences() {
    let x = random_array(&[2, 9, 3], ElementType::F64, 21);
    check_gradients(x, |g, x| {
        let options = Conv1d {
            strides: 2,
            padding: Padding::Same,
            activation: Activation::Tanh,
            ..Conv1d::default()
        };
        conv1d(g, x, 5, 4, options).unwrap()
    });
}

#[test]
fn global_pooling_gradients_match_finite_differences() {
    check_gradients(random_array(&[2, 7, 3], ElementType::F64, 22), |g, x| {
        global_max_pooling(g, x).unwrap()
    });
    check_gradients(random_array(&[2, 3, 4, 3], ElementType::F64, 23), |g, x| {
        global_average_pooling(g, x).unwrap()
    });
}

#[test]
fn global_pooling_reduces_between_batch_and_channels() {
    let x = random_array(&[2, 3, 5, 4], ElementType::F32, 9);
    let v = values(&x);
    let (mut max, mut mean) = (vec![f64::NEG_INFINITY; 8], vec![0.0; 8]);
    for b in 0..2 {
        for s in 0..15 {
            for c in 0..4 {
                let e = v[(b * 15 + s) * 4 + c];
                max[b * 4 + c] = f64::max(max[b * 4 + c], e);
                mean[b * 4 + c] += e / 15.0;
            }
        }
    }
    let (module, args, _) = trace(&x, |g, x| {
        vec![
            global_max_pooling(g, x).unwrap(),
            global_average_pooling(g, x).unwrap(),
            // Rank 3: over time.
            global_max_pooling(g, &x.reshape(&[2, 15, 4])).unwrap(),
        ]
    });
    check_both(&module, &args, &[max.clone(), mean, max], 1e-6);
}

fn ids(dims: &[i64], values: Vec<i32>) -> Array {
    Array::new(
        ArrayShape::new(ElementType::S32, dims),
        ArrayData::S32(values),
    )
}

#[test]
fn embedding_reads_rows_and_its_gradient_adds_into_them() {
    // Id 3 three times, 0 and the last row (6) once each; rows 1, 2, 4, 5 unread.
    let id_values = vec![3, 0, 6, 3, 3, 6];
    let x = ids(&[2, 3], id_values.clone());
    let mut g = Graph::new("embedding", Mode::Train, Some(42));
    let input = g.tracer.parameter("x", &[2, 3], ElementType::S32);
    let y = embedding(&mut g, &input, 7, 5, Embedding::default()).unwrap();
    assert_eq!(y.shape().unwrap().dims.as_slice(), [2, 3, 5]);
    let r = random_array(&[2, 3, 5], ElementType::F32, 31);
    let weights = g.tracer.constant(r.clone());
    let loss = (&y * &weights).reduce_sum(&[], false);
    let table_tensor = g
        .variables
        .all()
        .next()
        .expect("the table")
        .1
        .tensor
        .clone();
    let grad = g.tracer.grad(&loss, &[&table_tensor]);
    let init = g.variables.initial_values().unwrap();
    let table = values(&init[0]);
    assert_eq!(
        g.variables.all().next().unwrap().1.name,
        "embedding/embeddings"
    );
    assert!(
        table.iter().all(|v| v.abs() <= 0.05),
        "uniform in [-0.05, 0.05]"
    );
    let module = g.tracer.finish(&[&y, &grad[0]]).expect("traces");
    let rows: Vec<f64> = id_values
        .iter()
        .flat_map(|&i| table[i as usize * 5..i as usize * 5 + 5].to_vec())
        .collect();
    let mut d_table = vec![0.0; 35];
    let rv = values(&r);
    for (pos, &i) in id_values.iter().enumerate() {
        for d in 0..5 {
            d_table[i as usize * 5 + d] += rv[pos * 5 + d];
        }
    }
    let args = vec![scalar_step(0), x, init[0].clone()];
    check_both(&module, &args, &[rows, d_table], 1e-6);
}

#[test]
fn layer_input_mistakes_are_errors() {
    let mut g = Graph::new("errors", Mode::Train, Some(1));
    let image = g.tracer.parameter("image", &[2, 4, 4, 3], ElementType::F32);
    let floats = g.tracer.parameter("floats", &[2, 5], ElementType::F32);
    let matrix = g.tracer.parameter("matrix", &[2, 5], ElementType::F32);
    let message = |e: LayerError| e.to_string();
    let e = message(conv1d(&mut g, &image, 4, 3, Conv1d::default()).unwrap_err());
    assert!(e.contains("conv1d `conv1d`") && e.contains("rank 3"), "{e}");
    let e =
        message(conv1d(&mut g, &matrix.reshape(&[2, 5, 1]), 0, 3, Conv1d::default()).unwrap_err());
    assert!(e.contains("must be at least 1"), "{e}");
    let e = message(embedding(&mut g, &floats, 10, 4, Embedding::default()).unwrap_err());
    assert!(e.contains("needs integer ids, got f32"), "{e}");
    let ints = floats.cast(ElementType::S32);
    let e = message(embedding(&mut g, &ints, 0, 4, Embedding::default()).unwrap_err());
    assert!(e.contains("input_dim 0"), "{e}");
    let e = message(global_max_pooling(&mut g, &matrix).unwrap_err());
    assert!(
        e.contains("global_max_pooling") && e.contains("rank 3"),
        "{e}"
    );
}
