//! Gradients of a loss through each layer (with respect to the input and every trainable
//! variable) against central finite differences, in f64 on the interpreter.

use crate::support::{random_array, run, scalar_step, values};
use tessel_compiler::ir::{Array, ArrayData, ElementType::F64};
use tessel_compiler::trace::Tensor;
use tessel_estimator::model::layers::{
    average_pooling2d, batch_normalization, conv2d, dense, dropout, flatten, max_pooling2d,
    Activation, BatchNorm, Conv2d, Dense, Padding,
};
use tessel_estimator::model::{Graph, Initializer, Mode};
use tessel_runtime::session::Device;

/// Traces `loss = sum(layer(x) * r)` (r fixed) and its gradients with respect to x and the
/// trainable variables; compares each gradient with central differences of the loss at a
/// spread of elements.
fn check_gradients(dims: &[i64], build: impl FnOnce(&mut Graph, &Tensor) -> Tensor) {
    let x = random_array(dims, F64, 11);
    let mut g = Graph::new("grad", Mode::Train, Some(3));
    let input = g.tracer.parameter("x", dims, F64);
    let y = build(&mut g, &input);
    let y_dims: Vec<i64> = y.shape().expect("traced").dims.as_slice().to_vec();
    let r = g.tracer.constant(random_array(&y_dims, F64, 12));
    let loss = (&y * &r).reduce_sum(&[], false);
    let mut params = vec![input.clone()];
    let mut names = vec!["x".to_string()];
    // Parameter numbers: the step is 0, x is 1, variables follow in creation order.
    let mut numbers = vec![1];
    for (id, v) in g.variables.all().filter(|(_, v)| v.trainable) {
        params.push(v.tensor.clone());
        names.push(v.name.clone());
        numbers.push(2 + id.0);
    }
    let refs: Vec<&Tensor> = params.iter().collect();
    let grads = g.tracer.grad(&loss, &refs);
    let mut outs = vec![&loss];
    outs.extend(grads.iter());
    let init = g.variables.initial_values().unwrap();
    let module = g.tracer.finish(&outs).expect("traces");
    let mut args = vec![scalar_step(5), x];
    args.extend(init.into_iter().map(|a| perturb_zeros(&a)));
    let out = run(&module, &Device::interpreter(), args.clone());
    for (i, name) in names.iter().enumerate() {
        let analytic = values(&out[1 + i]);
        let p = numbers[i];
        let n = analytic.len();
        let picks: Vec<usize> = (0..n).step_by((n / 12).max(1)).collect();
        for k in picks {
            let eps = 1e-5;
            let at = |delta: f64| {
                let mut a = args.clone();
                a[p] = shifted(&a[p], k, delta);
                values(&run(&module, &Device::interpreter(), a)[0])[0]
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
            assert!(
                (numeric - analytic[k]).abs() <= 1e-5 * numeric.abs().max(1.0),
                "d loss / d {name}[{k}]: analytic {} vs numeric {numeric}",
                analytic[k]
            );
        }
    }
}

/// Zeros and ones (biases, beta, gamma) become random, so every path is exercised.
fn perturb_zeros(a: &Array) -> Array {
    let r = random_array(a.shape.dims.as_slice(), F64, 13);
    let data = ArrayData::from_f64_fn(F64, a.len(), |i| {
        a.data.get_f64(i) + 0.3 * r.data.get_f64(i)
    });
    Array::new(a.shape.clone(), data)
}

fn shifted(a: &Array, k: usize, delta: f64) -> Array {
    let data = ArrayData::from_f64_fn(F64, a.len(), |i| {
        a.data.get_f64(i) + if i == k { delta } else { 0.0 }
    });
    Array::new(a.shape.clone(), data)
}

#[test]
fn conv2d_gradients() {
    check_gradients(&[2, 5, 4, 2], |g, x| {
        conv2d(
            g,
            x,
            3,
            [3, 2],
            Conv2d {
                padding: Padding::Same,
                strides: [2, 1],
                activation: Activation::Tanh,
                ..Conv2d::default()
            },
        )
        .unwrap()
    });
}

#[test]
fn dense_gradients() {
    check_gradients(&[3, 6], |g, x| {
        dense(
            g,
            x,
            4,
            Dense {
                activation: Activation::Sigmoid,
                ..Dense::default()
            },
        )
        .unwrap()
    });
}

#[test]
fn pooling_and_flatten_gradients() {
    check_gradients(&[1, 5, 5, 2], |g, x| {
        let a = max_pooling2d(g, x, [2, 2], [2, 2], Padding::Same).unwrap();
        let b = average_pooling2d(g, x, [3, 3], [2, 2], Padding::Same).unwrap();
        flatten(g, &(a + b)).unwrap()
    });
}

#[test]
fn batch_normalization_gradients_in_training() {
    check_gradients(&[3, 2, 2, 3], |g, x| {
        batch_normalization(g, x, BatchNorm::default(), true).unwrap()
    });
}

#[test]
fn dropout_gradients_follow_the_mask() {
    check_gradients(&[4, 8], |g, x| {
        let y = dense(
            g,
            x,
            6,
            Dense {
                kernel_initializer: Initializer::RandomNormal {
                    mean: 0.0,
                    stddev: 0.5,
                },
                ..Dense::default()
            },
        )
        .unwrap();
        dropout(g, &y, 0.5, true).unwrap()
    });
}
