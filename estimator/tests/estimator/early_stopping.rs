//! Early stopping (`stop_if_no_decrease_hook` / `stop_if_no_increase_hook`) evaluating in
//! process, and `train_and_evaluate`'s in-process evaluations: equal to evaluating the
//! checkpoint of the same step, with the training graph traced and compiled once.

use crate::support::tiny::{self, checkpoint_steps, config, temp_dir};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tessel_estimator::estimator::{ContinuousEval, EvalSpec, TrainSpec};
use tessel_estimator::hooks::{stop_if_no_decrease_hook, stop_if_no_increase_hook};
use tessel_estimator::{EstimatorError, Mode, Params, RunConfig, TpuEstimator};

/// The tiny model, counting its traces per mode: [train, eval].
fn counting_estimator(config: RunConfig, params: Params) -> (TpuEstimator, Arc<[AtomicUsize; 2]>) {
    let traces: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let seen = Arc::clone(&traces);
    let est = TpuEstimator::new(
        move |g, f, l, mode, p| {
            if mode != Mode::Predict {
                seen[usize::from(mode == Mode::Eval)].fetch_add(1, Ordering::SeqCst);
            }
            tiny::model_fn(g, f, l, mode, p)
        },
        config,
        params,
        false,
        8,
        Some(8),
        None,
    )
    .unwrap()
    .quiet();
    (est, traces)
}

#[test]
fn stop_if_no_decrease_stops_when_the_eval_loss_plateaus() {
    let dir = temp_dir("early_plateau");
    // A learning rate of 0: the variables never change, so the eval loss is flat.
    let est = tiny::estimator(
        config(&dir, 5, 1000),
        Params::new().with("learning_rate", 0.0),
    );
    let hook = stop_if_no_decrease_hook(
        |ctx| est.evaluate_run(tiny::eval_input, None, ctx),
        "loss",
        10,
        0,
        5,
    );
    let r = est
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(100),
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    // Evaluations at 5 (the best), 10 and 15: 15 - 5 >= 10.
    assert_eq!(r.global_step, 15);
    assert!(
        r.log.iter().any(|l| l
            == "No decrease in metric \"loss\" for 10 steps, which is greater than or equal to max steps (10) configured for early stopping."),
        "{:?}",
        r.log
    );
    assert_eq!(
        r.log
            .iter()
            .filter(|l| l.starts_with("Saving dict for global step "))
            .count(),
        3
    );
    // The stop saved its checkpoint, and the evaluation events are in model_dir/eval.
    assert_eq!(checkpoint_steps(&dir), vec![0, 15]);
    assert!(dir.join("eval").is_dir());
}

#[test]
fn early_stopping_lets_a_learning_model_train_on() {
    let dir = temp_dir("early_learning");
    let est = tiny::estimator(
        config(&dir, 5, 1000),
        Params::new().with("learning_rate", 0.05),
    );
    let hook = stop_if_no_decrease_hook(
        |ctx| est.evaluate_run(tiny::eval_input, None, ctx),
        "loss",
        15,
        0,
        5,
    );
    let r = est
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(30),
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    assert_eq!(r.global_step, 30);
    assert!(!r.log.iter().any(|l| l.starts_with("No decrease")));

    // stop_if_no_increase_hook: a flat accuracy is no increase.
    let dir = temp_dir("early_flat_accuracy");
    let est = tiny::estimator(
        config(&dir, 5, 1000),
        Params::new().with("learning_rate", 0.0),
    );
    let hook = stop_if_no_increase_hook(
        |ctx| est.evaluate_run(tiny::eval_input, None, ctx),
        "accuracy",
        10,
        0,
        5,
    );
    let r = est
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(100),
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    assert_eq!(r.global_step, 15);
    assert!(r
        .log
        .iter()
        .any(|l| l.starts_with("No increase in metric \"accuracy\"")));

    // min_steps: evaluations before it are not counted.
    let dir = temp_dir("early_min_steps");
    let est = tiny::estimator(
        config(&dir, 5, 1000),
        Params::new().with("learning_rate", 0.0),
    );
    let hook = stop_if_no_decrease_hook(
        |ctx| est.evaluate_run(tiny::eval_input, None, ctx),
        "loss",
        10,
        20,
        5,
    );
    let r = est
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(100),
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    // Best at 20 (the first counted), a stop at 30.
    assert_eq!(r.global_step, 30);
}

#[test]
fn early_stopping_on_an_unknown_metric_is_an_error() {
    let dir = temp_dir("early_unknown");
    let est = tiny::estimator(config(&dir, 5, 1000), Params::new());
    let hook = stop_if_no_decrease_hook(
        |ctx| est.evaluate_run(tiny::eval_input, None, ctx),
        "recall",
        10,
        0,
        5,
    );
    let e = est
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(20),
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap_err();
    assert!(matches!(e, EstimatorError::Value(_)), "{e}");
    assert!(
        e.to_string()
            .starts_with("metric_name recall not found in the evaluation's results: "),
        "{e}"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0]);
}

#[test]
fn train_and_evaluate_evaluates_in_process_like_the_checkpoint() {
    let dir = temp_dir("tae_in_process");
    // Loops of 5; evaluations every 10 (a multiple: one loop length) to 30.
    let (est, traces) = counting_estimator(config(&dir, 5, 10), Params::new());
    let train = TrainSpec {
        input_fn: tiny::train_input,
        max_steps: 30,
    };
    let eval = EvalSpec {
        input_fn: tiny::eval_input,
        steps: None,
        every_n_steps: Some(10),
        continuous: ContinuousEval::default(),
    };
    let r = est.train_and_evaluate(&train, &eval).unwrap().unwrap();
    assert_eq!(r.global_step, 30);
    // The training graph traced once and its loop compiled once; one evaluation trace each,
    // its programs (loops of 5 and the last 2 of the 12 batches) compiled for the first only.
    assert_eq!(traces[0].load(Ordering::SeqCst), 1);
    assert_eq!(traces[1].load(Ordering::SeqCst), 3);
    assert_eq!(
        r.log.last().unwrap(),
        "Trained to step 30 with 3 evaluations in process; loop programs compiled: 1 for training, 2 for evaluation."
    );
    assert!(!r.log.iter().any(|l| l.starts_with("Restoring parameters")));
    // The same numbers as evaluating the checkpoint of step 30.
    let from_checkpoint = est.evaluate(tiny::eval_input, None).unwrap();
    assert_eq!(from_checkpoint.global_step, 30);
    assert_eq!(from_checkpoint.loss, r.loss);
    assert_eq!(from_checkpoint.metrics, r.metrics);

    // Evaluations not on a loop boundary: the loop is shortened to land on them.
    let dir = temp_dir("tae_shortened");
    let (est, _) = counting_estimator(config(&dir, 5, 1000), Params::new());
    let eval = EvalSpec {
        input_fn: tiny::eval_input,
        steps: Some(3),
        every_n_steps: Some(7),
        continuous: ContinuousEval::default(),
    };
    let train = TrainSpec {
        input_fn: tiny::train_input,
        max_steps: 16,
    };
    let r = est.train_and_evaluate(&train, &eval).unwrap().unwrap();
    let evaluated: Vec<&String> = r
        .log
        .iter()
        .filter(|l| l.starts_with("Saving dict for global step "))
        .collect();
    assert_eq!(evaluated.len(), 3, "{evaluated:?}");
    assert!(evaluated[0].starts_with("Saving dict for global step 7: "));
    assert!(evaluated[1].starts_with("Saving dict for global step 14: "));
    assert!(evaluated[2].starts_with("Saving dict for global step 16: "));
}

#[test]
fn the_stop_flag_during_an_in_process_evaluation_stops_training_with_a_checkpoint() {
    let dir = temp_dir("early_stop_flag");
    let est = tiny::estimator(config(&dir, 5, 1000), Params::new());
    let flag = est.stop_flag();
    let hook = stop_if_no_decrease_hook(
        |ctx| {
            // Ctrl-C arrives while the evaluation at step 10 runs.
            if ctx.global_step() == 10 {
                flag.store(true, Ordering::SeqCst);
            }
            est.evaluate_run(tiny::eval_input, None, ctx)
        },
        "loss",
        100,
        0,
        5,
    );
    let e = est
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(100),
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap_err();
    // The evaluation finished; training saved step 10 and stopped.
    assert!(matches!(e, EstimatorError::Interrupted { step: 10 }), "{e}");
    assert_eq!(checkpoint_steps(&dir), vec![0, 10]);
    assert!(!flag.load(Ordering::SeqCst));
}
