//! The evaluator task of a TF_CONFIG cluster: continuous evaluation of the checkpoints a
//! trainer writes in the same model_dir, ending at `max_steps` or on the timeout; a
//! checkpoint that is gone or half-written is skipped with a warning.

use crate::support::tiny::{self, temp_dir};
use std::path::Path;
use std::time::Duration;
use tessel_estimator::checkpoint::{read_checkpoint, Saver};
use tessel_estimator::estimator::tf_config::{TaskType, TfConfig};
use tessel_estimator::estimator::{
    ContinuousEval, EvalSpec, EvaluatorEnd, EvaluatorRun, Input, TrainSpec,
};
use tessel_estimator::summary::{read_events, EventKind};
use tessel_estimator::{EstimatorError, Params, TpuEstimator};

const CLUSTER: &str =
    r#""cluster": {"chief": ["localhost:2222"], "evaluator": ["localhost:2223"]}"#;

fn task(task_type: &str) -> TfConfig {
    TfConfig::parse(&format!(
        r#"{{{CLUSTER}, "task": {{"type": "{task_type}", "index": 0}}}}"#
    ))
    .unwrap()
}

/// The tiny model in `dir` (loops of 5, a checkpoint every 10 steps) as `task_type`.
fn estimator(dir: &Path, task_type: &str) -> TpuEstimator {
    let mut config = tiny::config(dir, 5, 10);
    config.tf_config = Some(task(task_type));
    tiny::estimator(config, Params::new())
}

type InputFn = fn(&Params) -> Result<Input, EstimatorError>;

fn eval_spec(timeout: Duration, name: Option<&str>) -> EvalSpec<InputFn> {
    EvalSpec {
        input_fn: tiny::eval_input,
        steps: None,
        every_n_steps: None,
        continuous: ContinuousEval {
            name: name.map(str::to_string),
            start_delay: Duration::ZERO,
            throttle: Duration::ZERO,
            poll_interval: Duration::from_millis(10),
            timeout: Some(timeout),
        },
    }
}

fn steps_evaluated(run: &EvaluatorRun) -> Vec<i64> {
    run.evaluations.iter().map(|e| e.global_step).collect()
}

/// The steps of the `loss` scalars in the event files of `dir`.
fn loss_event_steps(dir: &Path) -> Vec<i64> {
    let mut steps = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        for event in read_events(entry.unwrap().path()).unwrap() {
            if let Some(EventKind::Summary(s)) = &event.what {
                if s.value.iter().any(|v| v.tag == "loss") {
                    steps.push(event.step);
                }
            }
        }
    }
    steps.sort();
    steps
}

#[test]
fn an_evaluator_beside_the_trainer_evaluates_its_checkpoints_until_max_steps() {
    let dir = temp_dir("evaluator_beside_trainer");
    let chief = estimator(&dir, "chief");
    let evaluator = estimator(&dir, "evaluator");
    assert_eq!(evaluator.config().task_type(), TaskType::Evaluator);
    let train = TrainSpec {
        input_fn: tiny::train_input,
        max_steps: 60,
    };
    // A generous timeout: the evaluator must end at step 60, not on it.
    let eval = eval_spec(Duration::from_secs(120), None);
    let (trained, run) = std::thread::scope(|s| {
        let evaluating = s.spawn(|| evaluator.train_and_evaluate(&train, &eval));
        let trained = chief.train_and_evaluate(&train, &eval);
        (trained, evaluating.join().unwrap())
    });
    // The chief trains only: the evaluator task evaluates.
    assert!(trained.unwrap().is_none());
    let last = run.unwrap().expect("the evaluator evaluated");
    assert_eq!(last.global_step, 60);
    assert!(
        last.log
            .iter()
            .any(|l| l == "Exiting evaluation, global_step=60 >= train max_steps=60"),
        "{:#?}",
        last.log
    );
    // Every evaluation is of a checkpoint the trainer wrote, each once, in order; the last
    // equals evaluating the final checkpoint.
    let evaluated: Vec<i64> = last
        .log
        .iter()
        .filter_map(|l| l.strip_prefix("Saving dict for global step "))
        .map(|l| l.split(':').next().unwrap().parse().unwrap())
        .collect();
    assert!(evaluated.windows(2).all(|w| w[0] < w[1]), "{evaluated:?}");
    assert!(evaluated.iter().all(|s| s % 10 == 0), "{evaluated:?}");
    assert_eq!(loss_event_steps(&dir.join("eval")), evaluated);
    let again = tiny::estimator(tiny::config(&dir, 5, 10), Params::new())
        .evaluate(tiny::eval_input, None)
        .unwrap();
    assert_eq!((again.loss, &again.metrics), (last.loss, &last.metrics));
    // The evaluator wrote no checkpoint and took no trainer lock from the chief.
    let saved = Saver::new(&*dir, 5).state().unwrap().unwrap();
    assert_eq!(
        saved.model_checkpoint_path.as_deref(),
        Some("model.ckpt-60")
    );
}

#[test]
fn the_evaluator_evaluates_the_latest_checkpoint_once_then_times_out() {
    let dir = temp_dir("evaluator_timeout");
    estimator(&dir, "chief")
        .train(tiny::train_input, None, Some(30))
        .unwrap();
    let evaluator = estimator(&dir, "evaluator");
    // max_steps 50 is never reached: it evaluates step 30 (not 0..20, passed over for the
    // latest) once, then no new checkpoint comes.
    let started = std::time::Instant::now();
    let run = evaluator
        .run_evaluator(50, &eval_spec(Duration::from_millis(300), Some("holdout")))
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(run.ended, EvaluatorEnd::TimedOut);
    assert_eq!(steps_evaluated(&run), vec![30]);
    assert!(run.skipped.is_empty());
    assert_eq!(
        run.log.last().unwrap(),
        "Timed-out waiting for a checkpoint."
    );
    // EvalSpec's name: the events go to eval_holdout.
    assert_eq!(loss_event_steps(&dir.join("eval_holdout")), vec![30]);
    assert!(!dir.join("eval").exists());
}

#[test]
fn an_empty_model_dir_times_out_with_tfs_warning() {
    let dir = temp_dir("evaluator_untrained");
    let run = estimator(&dir, "evaluator")
        .run_evaluator(10, &eval_spec(Duration::from_millis(100), None))
        .unwrap();
    assert_eq!(run.ended, EvaluatorEnd::TimedOut);
    assert!(run.evaluations.is_empty());
    assert!(run.log.iter().any(|l| l
        == "Estimator is not trained yet. Will start an evaluation when a checkpoint is ready."));
}

#[test]
fn vanished_and_half_written_checkpoints_are_skipped_with_a_warning() {
    let dir = temp_dir("evaluator_vanished");
    estimator(&dir, "chief")
        .train(tiny::train_input, None, Some(20))
        .unwrap();
    // The state file names model.ckpt-20, whose file is gone.
    let ckpt20 = dir.join("model.ckpt-20.safetensors");
    std::fs::remove_file(&ckpt20).unwrap();
    let evaluator = estimator(&dir, "evaluator");
    let run = evaluator
        .run_evaluator(30, &eval_spec(Duration::from_millis(200), None))
        .unwrap();
    assert_eq!(run.ended, EvaluatorEnd::TimedOut);
    assert!(run.evaluations.is_empty());
    assert_eq!(run.skipped.len(), 1, "{:?}", run.skipped);
    assert!(
        run.skipped[0].starts_with(&format!(
            "model.ckpt-20: its file is gone ({} does not exist",
            ckpt20.display()
        )),
        "{:?}",
        run.skipped
    );
    assert!(
        run.log
            .iter()
            .any(|l| l.starts_with("Skipping checkpoint model.ckpt-20: the checkpoint state file names it, but its file is gone")),
        "{:#?}",
        run.log
    );

    // A half-written file (cut short) is skipped the same way; once a checkpoint at
    // max_steps comes, it is evaluated and ends the evaluator.
    let ten = read_checkpoint(&dir.join("model.ckpt-10.safetensors")).unwrap();
    let bytes = std::fs::read(dir.join("model.ckpt-10.safetensors")).unwrap();
    std::fs::write(&ckpt20, &bytes[..bytes.len() / 2]).unwrap();
    let run = evaluator
        .run_evaluator(30, &eval_spec(Duration::from_millis(200), None))
        .unwrap();
    assert!(run.evaluations.is_empty());
    assert!(
        run.skipped[0].starts_with("model.ckpt-20: it does not read back, half-written or damaged"),
        "{:?}",
        run.skipped
    );
    let saver = Saver::new(&*dir, 5);
    let mut thirty = ten;
    thirty.global_step = 30;
    saver.save(&thirty).unwrap();
    let run = evaluator
        .run_evaluator(30, &eval_spec(Duration::from_secs(60), None))
        .unwrap();
    assert_eq!(run.ended, EvaluatorEnd::MaxSteps);
    assert_eq!(steps_evaluated(&run), vec![30]);
}
