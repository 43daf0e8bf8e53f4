//! The hooks `train` installs, each on its own cadence: StopAtStepHook, SummarySaverHook,
//! LoggingTensorHook, StepCounterHook, NanTensorHook, CheckpointSaverHook; and a user's
//! copies of them added to a train call.

use crate::support::tiny::{self, checkpoint_steps, config, estimator, files, temp_dir};
use std::path::Path;
use tessel_estimator::hooks::{
    CheckpointSaverHook, LoggingTensorHook, NanTensorHook, StepCounterHook, StopAtStepHook,
    SummarySaverHook,
};
use tessel_estimator::summary::{read_events, EventKind};
use tessel_estimator::{EstimatorError, Params};

/// The steps at which the event files of `dir` hold `tag`.
fn tag_steps(dir: &Path, tag: &str) -> Vec<i64> {
    let mut steps = Vec::new();
    for f in files(dir)
        .iter()
        .filter(|f| f.starts_with("events.out.tfevents."))
    {
        for e in read_events(dir.join(f)).unwrap() {
            if let Some(EventKind::Summary(s)) = &e.what {
                if s.value.iter().any(|v| v.tag == tag) {
                    steps.push(e.step);
                }
            }
        }
    }
    steps
}

fn log_steps(log: &[String], prefix: &str) -> Vec<String> {
    log.iter()
        .filter(|l| l.starts_with(prefix))
        .cloned()
        .collect()
}

#[test]
fn stop_at_step_hook_shortens_the_loop_to_land_on_its_step() {
    let dir = temp_dir("builtin_stop_at");
    // The user's hook stops at 7, before train's own target (100): loops of 5 and 2.
    let r = estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(100),
            None,
            vec![Box::new(StopAtStepHook::num_steps(7))],
            vec![],
        )
        .unwrap();
    assert_eq!(r.global_step, 7);
    assert_eq!(r.loops_compiled, 2);
    assert_eq!(checkpoint_steps(&dir), vec![0, 7]);
    // last_step: a global step, from wherever the model_dir is.
    let r = estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(100),
            None,
            vec![Box::new(StopAtStepHook::last_step(9))],
            vec![],
        )
        .unwrap();
    assert_eq!(r.global_step, 9);
    // A last step already passed: no loop runs, nothing more is saved.
    let r = estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(100),
            None,
            vec![Box::new(StopAtStepHook::last_step(3))],
            vec![],
        )
        .unwrap();
    assert_eq!(
        (r.global_step, r.final_loss, r.loops_compiled),
        (9, None, 0)
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 7, 9]);
}

#[test]
fn summary_saver_hook_writes_every_save_steps_and_the_last_step() {
    let dir = temp_dir("builtin_summary");
    let mut c = config(&dir, 5, 1000);
    c.save_summary_steps = 3;
    estimator(c, Params::new())
        .train(tiny::train_input, Some(10), None)
        .unwrap();
    assert_eq!(tag_steps(&dir, "loss"), vec![3, 6, 9, 10]);
    assert_eq!(tag_steps(&dir, "batch_accuracy"), vec![3, 6, 9, 10]);

    // A user's SummarySaverHook writes to the same event file at its own cadence.
    let dir = temp_dir("builtin_summary_user");
    let mut c = config(&dir, 5, 1000);
    c.save_summary_steps = 100;
    estimator(c, Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(10),
            None,
            vec![Box::new(SummarySaverHook::new(4))],
            vec![],
        )
        .unwrap();
    let mut steps = tag_steps(&dir, "learning_rate");
    steps.sort();
    // The user's 4, 8, 10 and the built-in's 10.
    assert_eq!(steps, vec![4, 8, 10, 10]);
}

#[test]
fn logging_tensor_hook_logs_at_the_first_loop_each_multiple_and_the_end() {
    let dir = temp_dir("builtin_logging");
    let mut c = config(&dir, 2, 1000);
    c.log_step_count_steps = 4;
    let r = estimator(c, Params::new())
        .train(tiny::train_input, Some(10), None)
        .unwrap();
    let lines = log_steps(&r.log, "loss = ");
    let steps: Vec<&str> = lines
        .iter()
        .map(|l| l.split(", step = ").nth(1).unwrap())
        .map(|s| s.split(' ').next().unwrap())
        .collect();
    assert_eq!(steps, ["2", "4", "8", "10"], "{lines:?}");
    assert!(!lines[0].ends_with("sec)") && lines[1].ends_with(" sec)"));

    // A user's hook logs the host_call values it names.
    let dir = temp_dir("builtin_logging_user");
    let r = estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(10),
            None,
            vec![Box::new(LoggingTensorHook::new(&["learning_rate"], 10))],
            vec![],
        )
        .unwrap();
    let lines = log_steps(&r.log, "learning_rate = ");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], "learning_rate = 0.01, step = 5");
    assert!(
        lines[1].starts_with("learning_rate = 0.01, step = 10 (") && lines[1].ends_with(" sec)"),
        "{}",
        lines[1]
    );
}

#[test]
fn step_counter_hook_logs_and_writes_the_rate_after_the_first_interval() {
    let dir = temp_dir("builtin_step_counter");
    let mut c = config(&dir, 2, 1000);
    c.log_step_count_steps = 4;
    let r = estimator(c, Params::new())
        .train(tiny::train_input, Some(10), None)
        .unwrap();
    assert_eq!(log_steps(&r.log, "global_step/sec: ").len(), 3);
    assert_eq!(log_steps(&r.log, "examples/sec: ").len(), 3);
    assert_eq!(tag_steps(&dir, "global_step/sec"), vec![4, 8, 10]);

    // Without a batch size a user's counter gives the step rate only.
    let dir = temp_dir("builtin_step_counter_user");
    let mut c = config(&dir, 5, 1000);
    c.log_step_count_steps = 1000;
    let r = estimator(c, Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(15),
            None,
            vec![Box::new(StepCounterHook::new(5, None))],
            vec![],
        )
        .unwrap();
    // The user's at 10 and 15 (not the first loop); the built-in's at 15.
    assert_eq!(log_steps(&r.log, "global_step/sec: ").len(), 3);
    assert_eq!(log_steps(&r.log, "examples/sec: ").len(), 1);
}

#[test]
fn nan_tensor_hook_fails_a_diverging_model_before_its_loop_is_saved() {
    let dir = temp_dir("builtin_nan");
    let e = estimator(
        config(&dir, 5, 5),
        Params::new().with("poison_loss_step", 7),
    )
    .train(tiny::train_input, None, Some(30))
    .unwrap_err();
    assert!(
        matches!(e, EstimatorError::LossDiverged { step: 8, .. }),
        "{e}"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 5]);
    // No summary of the failed loop either.
    assert!(tag_steps(&dir, "loss").iter().all(|s| *s <= 5));
}

#[test]
fn a_users_nan_hook_without_failing_stops_training_with_a_warning() {
    // The built-in runs first and fails; a user's lenient hook on a healthy model passes.
    let dir = temp_dir("builtin_nan_lenient");
    let r = estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(10),
            None,
            vec![Box::new(NanTensorHook::new(false))],
            vec![],
        )
        .unwrap();
    assert_eq!(r.global_step, 10);
    assert!(!r.log.iter().any(|l| l.starts_with("Model diverged")));
}

#[test]
fn checkpoint_saver_hook_saves_at_its_steps_and_at_the_end() {
    let dir = temp_dir("builtin_saver");
    let r = estimator(config(&dir, 5, 20), Params::new())
        .train(tiny::train_input, None, Some(45))
        .unwrap();
    assert_eq!(checkpoint_steps(&dir), vec![0, 20, 40, 45]);
    assert_eq!(r.checkpoints, 4);
    // A user's second saver (every 15 steps) saves into the same model_dir.
    let dir = temp_dir("builtin_saver_user");
    estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(30),
            vec![Box::new(CheckpointSaverHook::new(
                tessel_estimator::config::CheckpointInterval::Steps(15),
                vec![],
            ))],
            vec![],
        )
        .unwrap();
    assert_eq!(checkpoint_steps(&dir), vec![0, 15, 30]);
}
