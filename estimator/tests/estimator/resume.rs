//! Resuming is bitwise exact: training in several `train` calls writes the same checkpoint,
//! byte for byte (variables, Adam's slots, global step, input position), as one call, with
//! a shuffled repeated input, dropout, and loops of 30 steps that do not divide the stops.
//! Also: the interpreter and the JIT agree on the same training.

use crate::support::tiny::{self, ckpt_bytes, config, estimator, temp_dir};
use tessel_estimator::checkpoint::read_checkpoint;
use tessel_estimator::Params;
use tessel_runtime::session::Backend;

#[test]
fn two_calls_to_max_steps_equal_one_bitwise() {
    let one = temp_dir("resume_one");
    let two = temp_dir("resume_two");
    let a = estimator(config(&one, 30, 1000), Params::new());
    let r = a.train(tiny::train_input, None, Some(200)).unwrap();
    assert_eq!(r.global_step, 200);

    let b = estimator(config(&two, 30, 1000), Params::new());
    assert_eq!(
        b.train(tiny::train_input, None, Some(100))
            .unwrap()
            .global_step,
        100
    );
    // A new estimator object, as a new process would make.
    let b = estimator(config(&two, 30, 1000), Params::new());
    let r2 = b.train(tiny::train_input, None, Some(200)).unwrap();
    assert_eq!(r2.global_step, 200);
    assert!(r2
        .log
        .iter()
        .any(|l| l.starts_with("Restoring parameters from") && l.contains("model.ckpt-100")));

    let want = ckpt_bytes(&one, 200);
    assert!(
        want == ckpt_bytes(&two, 200),
        "resumed checkpoint differs from the uninterrupted one"
    );
    assert_eq!(r.final_loss, r2.final_loss);
    // The checkpoint holds what resuming needs: Adam's slots, the step, the input position.
    let c = read_checkpoint(&one.join("model.ckpt-200.safetensors")).unwrap();
    assert_eq!(c.global_step, 200);
    let names: Vec<&str> = c.variables.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"dense/kernel"), "{names:?}");
    assert!(names.iter().any(|n| n.contains("Adam")), "{names:?}");
    let batches = c
        .input_state
        .iter()
        .find(|(n, _)| n == "batches")
        .map(|(_, a)| a.data.get_i64(0));
    assert_eq!(batches, Some(200));
}

#[test]
fn relative_steps_resume_like_max_steps() {
    let a_dir = temp_dir("steps_a");
    let b_dir = temp_dir("steps_b");
    let a = estimator(config(&a_dir, 30, 1000), Params::new());
    a.train(tiny::train_input, None, Some(130)).unwrap();
    let b = estimator(config(&b_dir, 30, 1000), Params::new());
    // 70 relative steps, then 60 more: 130.
    assert_eq!(
        b.train(tiny::train_input, Some(70), None)
            .unwrap()
            .global_step,
        70
    );
    assert_eq!(
        b.train(tiny::train_input, Some(60), None)
            .unwrap()
            .global_step,
        130
    );
    assert!(ckpt_bytes(&a_dir, 130) == ckpt_bytes(&b_dir, 130));
}

#[test]
fn runs_are_reproducible_and_training_learns() {
    let a_dir = temp_dir("repro_a");
    let b_dir = temp_dir("repro_b");
    let p = Params::new().with("learning_rate", 0.05);
    let a = estimator(config(&a_dir, 25, 1000), p.clone());
    let ra = a.train(tiny::train_input, None, Some(300)).unwrap();
    let b = estimator(config(&b_dir, 25, 1000), p);
    b.train(tiny::train_input, None, Some(300)).unwrap();
    assert!(ckpt_bytes(&a_dir, 300) == ckpt_bytes(&b_dir, 300));
    // It learns: the eval accuracy over all 96 examples beats chance (1/3) by far.
    let e = a.evaluate(tiny::eval_input, Some(12)).unwrap();
    assert_eq!(e.examples, 96);
    let acc = e.metric("accuracy").unwrap();
    assert!(acc > 0.8, "accuracy {acc}, final loss {:?}", ra.final_loss);
}

/// The same training on the reference interpreter and the JIT: the variables agree within
/// float tolerance after 6 steps (SGD, so differences are not amplified by Adam's division).
#[test]
fn interpreter_and_jit_agree() {
    let p = Params::new()
        .with("optimizer", "sgd")
        .with("learning_rate", 0.1);
    let jit_dir = temp_dir("jit");
    let int_dir = temp_dir("interp");
    estimator(config(&jit_dir, 3, 1000), p.clone())
        .train(tiny::train_input, None, Some(6))
        .unwrap();
    estimator(config(&int_dir, 3, 1000), p)
        .with_backend(Backend::Interpreter)
        .train(tiny::train_input, None, Some(6))
        .unwrap();
    let j = read_checkpoint(&jit_dir.join("model.ckpt-6.safetensors")).unwrap();
    let i = read_checkpoint(&int_dir.join("model.ckpt-6.safetensors")).unwrap();
    let init = read_checkpoint(&jit_dir.join("model.ckpt-0.safetensors")).unwrap();
    assert_eq!(j.variables.len(), i.variables.len());
    let mut moved = 0.0f64;
    for (((name, a), (name_i, b)), (_, a0)) in
        j.variables.iter().zip(&i.variables).zip(&init.variables)
    {
        assert_eq!(name, name_i);
        for k in 0..a.len() {
            let (x, y) = (a.data.get_f64(k), b.data.get_f64(k));
            assert!(
                (x - y).abs() <= 1e-5 * y.abs().max(1.0),
                "{name}[{k}]: jit {x} vs interpreter {y}"
            );
            moved = moved.max((x - a0.data.get_f64(k)).abs());
        }
    }
    // The comparison means something only if training moved the variables.
    assert!(moved > 1e-3, "variables barely moved: {moved}");
}
