//! The MNIST example honours TF_CONFIG: an evaluator process beside a training one, on one
//! model_dir and without MPI, evaluates the checkpoints as they come and exits after the
//! `--train-steps` one; TF_CONFIG mistakes stop the program before anything runs.

use crate::support::tiny::temp_dir;
use std::path::Path;
use std::process::{Command, Output};

const CLUSTER: &str =
    r#""cluster": {"chief": ["localhost:2222"], "evaluator": ["localhost:2223"]}"#;

/// The MNIST example in `dir` with `tf_config`: `--mode train_and_evaluate` (unless `extra`
/// gives a mode) to step 100 at batch 16, loops of 25, a checkpoint every 25 steps, 3 eval
/// batches.
fn mnist_task(dir: &Path, tf_config: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(super::mnist_example());
    c.arg("--model-dir")
        .arg(dir)
        .args(["--train-steps", "100"])
        .args(["--batch-size", "16", "--iterations", "25"])
        .args(["--save-checkpoints-steps", "25", "--eval-steps", "3"])
        .args(["--random-seed", "7"])
        .args(extra)
        .env("TF_CONFIG", tf_config);
    if !extra.contains(&"--mode") {
        c.args(["--mode", "train_and_evaluate"]);
    }
    c
}

fn task(task_type: &str) -> String {
    format!(r#"{{{CLUSTER}, "task": {{"type": "{task_type}", "index": 0}}}}"#)
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_evaluator_process_evaluates_what_the_chief_process_trains() {
    let dir = temp_dir("evaluator_process");
    // Started first: it waits for the chief's checkpoints.
    let evaluator = mnist_task(
        &dir,
        &task("evaluator"),
        &[
            "--eval-start-delay-secs",
            "0",
            "--eval-throttle-secs",
            "0",
            "--eval-poll-secs",
            "0.05",
            "--eval-timeout-secs",
            "300",
        ],
    )
    .spawn_output();
    let chief = mnist_task(&dir, &task("chief"), &[]).output().unwrap();
    let evaluator = evaluator.join().unwrap();
    let (chief, evaluator) = (text(&chief), text(&evaluator));
    assert!(chief.starts_with("status Some(0)"), "{chief}");
    assert!(evaluator.starts_with("status Some(0)"), "{evaluator}");
    // The chief trained only; the evaluator evaluated until step 100.
    assert!(
        chief.contains("tessel task=chief 0 trained to step 100"),
        "{chief}"
    );
    assert!(!chief.contains("Saving dict for global step"), "{chief}");
    assert!(
        evaluator.contains("Running the evaluator task (evaluator 0)"),
        "{evaluator}"
    );
    assert!(
        evaluator.contains("Exiting evaluation, global_step=100 >= train max_steps=100"),
        "{evaluator}"
    );
    assert!(
        evaluator.contains("tessel global_step=100 examples=48 accuracy="),
        "{evaluator}"
    );
    let evaluated: Vec<i64> = evaluator
        .lines()
        .filter_map(|l| l.split("Saving dict for global step ").nth(1))
        .map(|l| l.split(':').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(evaluated.last(), Some(&100), "{evaluator}");
    assert!(evaluated.windows(2).all(|w| w[0] < w[1]), "{evaluated:?}");
    assert!(evaluated.iter().all(|s| s % 25 == 0), "{evaluated:?}");
    assert!(dir.join("eval").is_dir());
}

#[test]
fn tf_config_mistakes_stop_the_example_before_it_runs() {
    let dir = temp_dir("tf_config_mistakes");
    for (tf_config, extra, expected) in [
        (
            r#"{"cluster": {"chief": ["c:1"], "ps": ["p:1"]}, "task": {"type": "chief", "index": 0}}"#.to_string(),
            vec![],
            "error: TF_CONFIG asks for parameter servers (a \"ps\" job of 1 in the cluster), but tessel has none",
        ),
        (
            r#"{"cluster": {"chief": ["c:1"], "worker": ["w:1"]}, "task": {"type": "worker", "index": 0}}"#.to_string(),
            vec![],
            "error: TF_CONFIG's cluster has 2 training tasks (1 chief + 1 worker), but the MPI job has 1 process",
        ),
        (
            r#"{"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": 0},}"#.to_string(),
            vec![],
            "error: TF_CONFIG is not valid JSON at byte 70 (line 1, column 71)",
        ),
        (
            task("evaluator"),
            vec!["--mode", "train"],
            "error: TF_CONFIG's task is the evaluator, which evaluates each checkpoint of a training: run it with --mode train_and_evaluate (not train)",
        ),
    ] {
        let out = mnist_task(&dir, &tf_config, &extra).output().unwrap();
        let out = text(&out);
        assert!(out.starts_with("status Some(1)"), "{out}");
        assert!(out.contains(expected), "{tf_config}: {out}");
    }
    // Nothing ran: no checkpoint, no event.
    assert!(std::fs::read_dir(&*dir).unwrap().next().is_none());
}

trait SpawnOutput {
    /// Runs the command on a thread, its output collected.
    fn spawn_output(self) -> std::thread::JoinHandle<Output>;
}

impl SpawnOutput for Command {
    fn spawn_output(mut self) -> std::thread::JoinHandle<Output> {
        std::thread::spawn(move || self.output().expect("the example runs"))
    }
}
