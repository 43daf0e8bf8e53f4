//! Each optimizer's updates over 3 steps of a small linear least-squares model, against
//! TF1's update formulas computed here in f64; the JIT against the interpreter; TF's slot
//! names; the global step's increment.

use crate::support::{assert_close, f32_array, f32s, finish, Step, F32};
use tessel_compiler::ir::Array;
use tessel_estimator::model::optimizers::{Adagrad, Adam, GradientDescent, Momentum, RmsProp};
use tessel_estimator::model::{Graph, Initializer, Mode, Optimizer, OptimizerError};
use tessel_runtime::session::Device;

const X: [[f64; 3]; 4] = [
    [1.0, 2.0, -1.0],
    [0.5, -1.5, 2.0],
    [-2.0, 0.25, 1.0],
    [1.5, 1.0, 0.5],
];
const Y: [f64; 4] = [1.0, -2.0, 0.5, 3.0];
const W0: [f64; 3] = [0.5, -1.0, 2.0];
const B0: f64 = 0.3;

/// The model: `loss = mean((x @ w + b - y)^2)` with `w: f32[3,1]`, `b: f32[1]`; data are
/// parameters 1 and 2 after the global step.
pub fn linear_graph(batch: i64, num_shards: usize) -> (Graph, tessel_compiler::trace::Tensor) {
    let mut g = Graph::new("linear", Mode::Train, None);
    g.set_num_shards(num_shards);
    let x = g.tracer.parameter("x", &[batch, 3], F32);
    let y = g.tracer.parameter("y", &[batch, 1], F32);
    let w0 = Initializer::Value(f32_array(&[3, 1], &W0));
    let w = g.variables.push(&mut g.tracer, "w", &[3, 1], F32, w0, true);
    let b0 = Initializer::Value(f32_array(&[1], &[B0]));
    let b = g.variables.push(&mut g.tracer, "b", &[1], F32, b0, true);
    let (w, b) = (
        g.variables.get(w).tensor.clone(),
        g.variables.get(b).tensor.clone(),
    );
    let r = x.matmul(&w) + &b - &y;
    let loss = (&r * &r).reduce_mean(&[], false);
    (g, loss)
}

fn data(rows: &[[f64; 3]], ys: &[f64]) -> Vec<Array> {
    let n = rows.len() as i64;
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    vec![f32_array(&[n, 3], &flat), f32_array(&[n, 1], ys)]
}

/// Gradients of the mean squared residual, flat as `[w0, w1, w2, b]`.
fn gradient(p: &[f64]) -> Vec<f64> {
    let n = X.len() as f64;
    let mut g = vec![0.0; 4];
    for (row, y) in X.iter().zip(Y) {
        let r = row[0] * p[0] + row[1] * p[1] + row[2] * p[2] + p[3] - y;
        for k in 0..3 {
            g[k] += 2.0 * r * row[k] / n;
        }
        g[3] += 2.0 * r / n;
    }
    g
}

/// Runs `steps` reference steps of `update(params, grad, t)` (t from 1).
fn reference(steps: usize, mut update: impl FnMut(&mut [f64], &[f64], usize)) -> Vec<Vec<f64>> {
    let mut p = vec![W0[0], W0[1], W0[2], B0];
    (1..=steps)
        .map(|t| {
            let g = gradient(&p);
            update(&mut p, &g, t);
            p.clone()
        })
        .collect()
}

/// Builds the step with `opt`, checks the variables' names, runs 3 steps on the
/// interpreter and the JIT, and compares both with `want` (and with each other).
fn check(opt: &dyn Optimizer, names: &[&str], want: &[Vec<f64>]) {
    let (mut g, loss) = linear_graph(4, 1);
    let train_op = opt.minimize(&mut g, &loss).expect("minimize");
    assert!(!train_op.is_cross_shard());
    assert_eq!(train_op.updated.len(), 2);
    let step: Step = finish(g);
    assert_eq!(step.names, names);
    let feed = data(&X, &Y);
    let (interp, final_step) = step.run(Device::interpreter(), &feed, want.len());
    assert_eq!(
        final_step,
        want.len() as i32,
        "the global step counts the steps"
    );
    let (jit, _) = step.run(Device::jit(), &feed, want.len());
    for (t, want) in want.iter().enumerate() {
        for (label, run) in [("interpreter", &interp), ("jit", &jit)] {
            let mut got = f32s(&run[t][0]);
            got.extend(f32s(&run[t][1]));
            assert_close(
                &format!("{} step {} ({label})", opt.name(), t + 1),
                &got,
                want,
                2e-5,
            );
        }
        for (k, (a, b)) in interp[t].iter().zip(&jit[t]).enumerate() {
            assert_close(
                &format!("jit vs interpreter, {}", step.names[k]),
                &f32s(b),
                &f32s(a),
                1e-6,
            );
        }
    }
}

#[test]
fn gradient_descent_matches_tf1_formula() {
    let want = reference(3, |p, g, _| {
        for k in 0..4 {
            p[k] -= 0.1 * g[k];
        }
    });
    check(&GradientDescent::new(0.1), &["w", "b"], &want);
}

#[test]
fn momentum_matches_tf1_formula() {
    let mut acc = [0.0; 4];
    let want = reference(3, |p, g, _| {
        for k in 0..4 {
            acc[k] = 0.9 * acc[k] + g[k];
            p[k] -= 0.05 * acc[k];
        }
    });
    check(
        &Momentum::new(0.05, 0.9),
        &["w", "b", "w/Momentum", "b/Momentum"],
        &want,
    );
}

#[test]
fn nesterov_momentum_matches_tf1_formula() {
    let mut acc = [0.0; 4];
    let want = reference(3, |p, g, _| {
        for k in 0..4 {
            acc[k] = 0.9 * acc[k] + g[k];
            p[k] -= 0.05 * g[k] + 0.05 * 0.9 * acc[k];
        }
    });
    let opt = Momentum::new(0.05, 0.9).nesterov(true);
    check(&opt, &["w", "b", "w/Momentum", "b/Momentum"], &want);
}

#[test]
fn adam_matches_tf1_formula_and_compiles_on_the_jit() {
    let (b1, b2, eps, lr) = (0.9f32 as f64, 0.999f32 as f64, 1e-8, 0.01);
    let (mut m, mut v) = (vec![0.0; 4], vec![0.0; 4]);
    let want = reference(3, |p, g, t| {
        let lr_t = lr * (1.0 - b2.powi(t as i32)).sqrt() / (1.0 - b1.powi(t as i32));
        for k in 0..4 {
            m[k] += (g[k] - m[k]) * (1.0 - b1);
            v[k] += (g[k] * g[k] - v[k]) * (1.0 - b2);
            p[k] -= lr_t * m[k] / (v[k].sqrt() + eps);
        }
    });
    let names = [
        "w",
        "b",
        "beta1_power",
        "beta2_power",
        "w/Adam",
        "w/Adam_1",
        "b/Adam",
        "b/Adam_1",
    ];
    check(&Adam::new(0.01), &names, &want);
}

#[test]
fn adam_beta_powers_advance_each_step() {
    let (mut g, loss) = linear_graph(4, 1);
    Adam::new(0.01).minimize(&mut g, &loss).unwrap();
    let step = finish(g);
    let (history, _) = step.run(Device::jit(), &data(&X, &Y), 3);
    let powers = |t: usize| (history[t][2].data.get_f64(0), history[t][3].data.get_f64(0));
    let (b1, b2) = powers(2);
    assert_close("beta1_power", &[b1], &[0.9f64.powi(4)], 1e-6);
    assert_close("beta2_power", &[b2], &[0.999f64.powi(4)], 1e-6);
}

#[test]
fn rmsprop_matches_tf1_formula_with_rms_starting_at_one() {
    let (decay, eps, lr, mom) = (0.9f32 as f64, 1e-10, 0.01, 0.5);
    let (mut ms, mut mo) = (vec![1.0; 4], vec![0.0; 4]);
    let want = reference(3, |p, g, _| {
        for k in 0..4 {
            ms[k] += (g[k] * g[k] - ms[k]) * (1.0 - decay);
            mo[k] = mom * mo[k] + lr * g[k] / (ms[k] + eps).sqrt();
            p[k] -= mo[k];
        }
    });
    let names = [
        "w",
        "b",
        "w/RMSProp",
        "w/RMSProp_1",
        "b/RMSProp",
        "b/RMSProp_1",
    ];
    check(&RmsProp::new(0.01).momentum(0.5), &names, &want);
}

#[test]
fn centered_rmsprop_matches_tf1_formula() {
    let (decay, eps, lr) = (0.9f32 as f64, 1e-10, 0.01);
    let (mut ms, mut mg, mut mo) = (vec![1.0; 4], vec![0.0; 4], vec![0.0; 4]);
    let want = reference(3, |p, g, _| {
        for k in 0..4 {
            ms[k] += (g[k] * g[k] - ms[k]) * (1.0 - decay);
            mg[k] += (g[k] - mg[k]) * (1.0 - decay);
            mo[k] = lr * g[k] / (ms[k] - mg[k] * mg[k] + eps).sqrt();
            p[k] -= mo[k];
        }
    });
    let names = [
        "w",
        "b",
        "w/RMSProp",
        "w/RMSProp_1",
        "w/RMSProp_2",
        "b/RMSProp",
        "b/RMSProp_1",
        "b/RMSProp_2",
    ];
    check(&RmsProp::new(0.01).centered(true), &names, &want);
}

#[test]
fn adagrad_matches_tf1_formula() {
    let mut acc = [0.1f32 as f64; 4];
    let want = reference(3, |p, g, _| {
        for k in 0..4 {
            acc[k] += g[k] * g[k];
            p[k] -= 0.1 * g[k] / acc[k].sqrt();
        }
    });
    check(
        &Adagrad::new(0.1),
        &["w", "b", "w/Adagrad", "b/Adagrad"],
        &want,
    );
}

#[test]
fn a_second_optimizer_gets_tf_unique_slot_names() {
    let (mut g, loss) = linear_graph(4, 1);
    let opt = Adam::new(0.01);
    let gv = opt.compute_gradients(&mut g, &loss).unwrap();
    opt.apply_gradients(&mut g, &gv).unwrap();
    opt.apply_gradients(&mut g, &gv).unwrap();
    let names: Vec<_> = g.variables.all().map(|(_, v)| v.name.clone()).collect();
    assert!(names.contains(&"beta1_power_1".to_string()), "{names:?}");
    assert!(names.contains(&"w/Adam_2".to_string()), "{names:?}");
    assert!(names.contains(&"w/Adam_3".to_string()), "{names:?}");
}

#[test]
fn no_trainable_variables_is_tfs_error() {
    let mut g = Graph::new("empty", Mode::Train, None);
    let x = g.tracer.parameter("x", &[2], F32);
    let loss = x.reduce_sum(&[], false);
    let err = GradientDescent::new(0.1)
        .minimize(&mut g, &loss)
        .unwrap_err();
    assert_eq!(err, OptimizerError::NoVariables);
    assert_eq!(err.to_string(), "No variables to optimize.");
}

#[test]
fn a_non_scalar_learning_rate_is_refused() {
    let (mut g, loss) = linear_graph(4, 1);
    let lr = g.tracer.full(&[2], 0.1, F32);
    let err = GradientDescent::new(lr)
        .minimize(&mut g, &loss)
        .unwrap_err();
    assert_eq!(
        err,
        OptimizerError::LearningRate {
            shape: "f32[2]".into()
        }
    );
}

#[test]
fn a_traced_learning_rate_drives_the_update() {
    // lr = 0.1 / (1 + step): the step's own value reaches the update.
    let (mut g, loss) = linear_graph(4, 1);
    let step = g.global_step.cast(F32);
    let lr = (step + 1.0).scalar_like(0.1) / (g.global_step.cast(F32) + 1.0);
    GradientDescent::new(lr).minimize(&mut g, &loss).unwrap();
    let want = reference(3, |p, gr, t| {
        for k in 0..4 {
            p[k] -= 0.1 / t as f64 * gr[k];
        }
    });
    let step = finish(g);
    let (run, _) = step.run(Device::jit(), &data(&X, &Y), 3);
    for (t, want) in want.iter().enumerate() {
        let mut got = f32s(&run[t][0]);
        got.extend(f32s(&run[t][1]));
        assert_close("scheduled GD", &got, want, 2e-5);
    }
}

#[test]
fn a_variable_the_loss_does_not_use_gets_no_update_and_no_slots() {
    // TF gives it a `None` gradient: no slots, no update (a zero gradient would still create
    // slots and, with momentum already built up, move it).
    let (mut g, loss) = linear_graph(4, 1);
    let init = Initializer::Value(f32_array(&[2], &[1.5, -2.5]));
    let unused = g
        .variables
        .push(&mut g.tracer, "unused", &[2], F32, init, true);
    let opt = Adam::new(0.01);
    let gv = opt.compute_gradients(&mut g, &loss).unwrap();
    assert!(gv.iter().find(|p| p.var == unused).unwrap().grad.is_none());
    let train_op = opt.apply_gradients(&mut g, &gv).unwrap();
    assert!(!train_op.updated.contains(&unused));
    let step = finish(g);
    assert!(
        !step.names.iter().any(|n| n.starts_with("unused/")),
        "{:?}",
        step.names
    );
    let (history, _) = step.run(Device::interpreter(), &data(&X, &Y), 2);
    assert_eq!(f32s(&history[1][2]), [1.5, -2.5]);
}

#[test]
fn a_loss_of_no_variable_is_tfs_no_gradients_error() {
    let (mut g, _) = linear_graph(4, 1);
    let x = g.tracer.parameter("z", &[2], F32);
    let loss = x.reduce_sum(&[], false);
    let err = Momentum::new(0.1, 0.9).minimize(&mut g, &loss).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(
            "No gradients provided for any variable, check your graph for ops that do not \
             support gradients, between variables [\"w\", \"b\"] and loss Tensor("
        ),
        "{text}"
    );
}
