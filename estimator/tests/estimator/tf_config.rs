//! TF_CONFIG read as TF's RunConfig reads it: the task, `is_chief`, `num_worker_replicas`,
//! TF's errors and tessel's (parameter servers, bad JSON with its offset), the check against
//! the MPI job, and RunConfig's pickup (model_dir, a cluster the process's job is not).

use crate::support::tiny::{self, temp_dir};
use std::path::PathBuf;
use tessel_estimator::estimator::tf_config::{
    check_world, HostWorld, TaskType, TfConfig, TfConfigError,
};
use tessel_estimator::{EstimatorError, Params, RunConfig, TpuEstimator};

const CLUSTER: &str = r#""cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"], "evaluator": ["host3:2222"]}"#;

fn with_task(task_type: &str, index: i64) -> String {
    format!(r#"{{{CLUSTER}, "task": {{"type": "{task_type}", "index": {index}}}}}"#)
}

fn err(text: &str) -> String {
    TfConfig::parse(text).unwrap_err().to_string()
}

#[test]
fn a_worker_of_tfs_cluster() {
    let tf = TfConfig::parse(&with_task("worker", 1)).unwrap();
    assert_eq!((tf.task_type, tf.task_id), (TaskType::Worker, 1));
    assert!(tf.is_distributed());
    assert!(!tf.is_chief());
    assert_eq!(tf.num_worker_replicas(), 3);
    assert_eq!(tf.mpi_rank(), Some(2));
    assert_eq!(
        tf.cluster.job_tasks(TaskType::Worker),
        ["host1:2222", "host2:2222"]
    );
    assert_eq!(tf.model_dir, None);
}

#[test]
fn the_chief_and_the_evaluator() {
    let chief = TfConfig::parse(&with_task("chief", 0)).unwrap();
    assert!(chief.is_chief());
    assert_eq!(chief.num_worker_replicas(), 3);
    assert_eq!(chief.mpi_rank(), Some(0));

    let evaluator = TfConfig::parse(&with_task("evaluator", 0)).unwrap();
    assert!(!evaluator.is_chief());
    assert_eq!(evaluator.num_worker_replicas(), 0);
    assert_eq!(evaluator.mpi_rank(), None);
    // As in TF, the evaluator is not part of the training cluster: its index has no bound,
    // and the cluster need not list it.
    assert_eq!(
        TfConfig::parse(&with_task("evaluator", 3)).unwrap().task_id,
        3
    );
    let unlisted = r#"{"cluster": {"chief": ["h:1"]}, "task": {"type": "evaluator", "index": 0}}"#;
    assert_eq!(
        TfConfig::parse(unlisted).unwrap().task_type,
        TaskType::Evaluator
    );
}

#[test]
fn local_mode_and_tfs_other_spellings() {
    for text in [
        "{}",
        r#"{"task": {"type": "worker", "index": 0}}"#,
        r#"{"cluster": {}, "task": {}}"#,
    ] {
        let tf = TfConfig::parse(text).unwrap();
        assert_eq!(tf, TfConfig::local(), "{text}");
        assert!(tf.is_chief() && !tf.is_distributed());
        assert_eq!(tf.num_worker_replicas(), 1);
    }
    // An index written as a string (TF calls int() on it), and the legacy `master`.
    let tf = TfConfig::parse(&with_task("worker", 0).replace("\"index\": 0", "\"index\": \"1\""))
        .unwrap();
    assert_eq!(tf.task_id, 1);
    let master = r#"{"cluster": {"master": ["m:1"], "worker": ["w:1"]}, "task": {"type": "master", "index": 0}}"#;
    let tf = TfConfig::parse(master).unwrap();
    assert!(tf.is_chief());
    assert_eq!((tf.num_worker_replicas(), tf.mpi_rank()), (2, Some(0)));
    let dir = r#"{"model_dir": "/data/run1"}"#;
    assert_eq!(
        TfConfig::parse(dir).unwrap().model_dir,
        Some(PathBuf::from("/data/run1"))
    );
}

#[test]
fn bad_json_is_an_error_at_its_byte() {
    let text = "{\"cluster\": {\"chief\": [\"h:1\"],}\n}";
    let e = TfConfig::parse(text).unwrap_err();
    let comma = text.find(",}").unwrap();
    match &e {
        TfConfigError::Json {
            offset,
            line,
            column,
            ..
        } => {
            assert_eq!((*line, *column), (1, comma + 2), "{e}");
            assert_eq!(*offset, comma + 1, "{e}");
        }
        other => panic!("not a JSON error: {other}"),
    }
    assert!(
        e.to_string().starts_with(&format!(
            "TF_CONFIG is not valid JSON at byte {} (line 1, column {})",
            comma + 1,
            comma + 2
        )),
        "{e}"
    );
    // On a later line, the offset counts the lines before it.
    let text = "{\n  \"task\": {\"type\": \"worker\"\n}";
    match TfConfig::parse(text).unwrap_err() {
        TfConfigError::Json { offset, line, .. } => {
            assert_eq!(line, 3);
            assert_eq!(offset, text.len() - 1);
        }
        other => panic!("not a JSON error: {other}"),
    }
    assert_eq!(
        err("[1, 2]"),
        "TF_CONFIG itself in TF_CONFIG must be a JSON object, found [1,2]"
    );
    assert_eq!(
        err(r#"{"cluster": {"worker": "h:1"}}"#),
        "job \"worker\" of TF_CONFIG's cluster must be a list of \"host:port\" strings, found \"h:1\""
    );
}

#[test]
fn unknown_task_types_and_indices_out_of_range_are_tfs_errors() {
    let e = err(&with_task("trainer", 0));
    assert_eq!(
        e,
        "unknown task type \"trainer\" in TF_CONFIG's task: the task types are chief, worker and evaluator (and TF's master and ps)"
    );
    let e = err(
        r#"{"cluster": {"chief": ["a:1"], "tpu_worker": ["b:1"]}, "task": {"type": "chief", "index": 0}}"#,
    );
    assert!(
        e.starts_with("unknown task type \"tpu_worker\" in TF_CONFIG's cluster"),
        "{e}"
    );
    let e = err(&with_task("worker", 2));
    assert!(
        e.starts_with("2 is not a valid task_id for task_type worker in the cluster_spec:\n{\"chief\":[\"host0:2222\"],\"worker\":[\"host1:2222\",\"host2:2222\"],\"evaluator\":[\"host3:2222\"]}"),
        "{e}"
    );
    assert!(
        e.ends_with(
            "Note that these values may be coming from the TF_CONFIG environment variable."
        ),
        "{e}"
    );
    let e = err(&with_task("chief", 1));
    assert!(
        e.starts_with("1 is not a valid task_id for task_type chief"),
        "{e}"
    );
    let e = err(r#"{"cluster": {"chief": ["a:1"]}, "task": {"type": "worker", "index": 0}}"#);
    assert!(
        e.starts_with(
            "worker is not a valid task_type in the cluster_spec:\n{\"chief\":[\"a:1\"]}"
        ),
        "{e}"
    );
    let e = err(&with_task("worker", -1));
    assert_eq!(
        e,
        "Task index must be non-negative number (TF_CONFIG's task index is -1)."
    );
    assert_eq!(
        err(r#"{"cluster": {"chief": ["a:1"]}, "task": {"index": 0}}"#),
        "If \"cluster\" is set in TF_CONFIG, task type must be set."
    );
    assert_eq!(
        err(r#"{"cluster": {"chief": ["a:1"]}, "task": {"type": "chief"}}"#),
        "If \"cluster\" is set in TF_CONFIG, task index must be set."
    );
}

#[test]
fn a_cluster_needs_one_chief() {
    let e = err(
        r#"{"cluster": {"worker": ["w0:1", "w1:1", "w2:1"]}, "task": {"type": "worker", "index": 0}}"#,
    );
    assert_eq!(
        e,
        "If \"cluster\" is set in TF_CONFIG, it must have one \"chief\" node. It has 3 worker(s) and no chief: make the first the chief, e.g. \"cluster\": {\"chief\": [\"w0:1\"], \"worker\": [\"w1:1\",\"w2:1\"]}, its task {\"type\": \"chief\", \"index\": 0}."
    );
    let e = err(r#"{"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}}"#);
    assert_eq!(
        e,
        "The \"cluster\" in TF_CONFIG must have only one \"chief\" node (it has 2)."
    );
    let e = err(
        r#"{"cluster": {"chief": ["a:1"], "master": ["b:1"]}, "task": {"type": "chief", "index": 0}}"#,
    );
    assert_eq!(
        e,
        "If `master` node exists in `cluster`, job `chief` is not supported."
    );
    let e = err(r#"{"cluster": {"master": ["b:1"]}, "task": {"type": "evaluator", "index": 0}}"#);
    assert_eq!(
        e,
        "If `master` node exists in `cluster`, task_type `evaluator` is not supported."
    );
}

#[test]
fn without_a_cluster_only_worker_0_is_allowed() {
    assert_eq!(
        err(r#"{"task": {"type": "chief", "index": 0}}"#),
        "If \"cluster\" is not set in TF_CONFIG, task type must be WORKER (it is chief)."
    );
    assert_eq!(
        err(r#"{"task": {"type": "worker", "index": 1}}"#),
        "If \"cluster\" is not set in TF_CONFIG, task index must be 0 (it is 1)."
    );
    assert_eq!(
        err(r#"{"model_dir": ""}"#),
        "model_dir in TF_CONFIG should be non-empty."
    );
}

#[test]
fn parameter_servers_are_refused_with_the_fix() {
    let cluster = r#"{"cluster": {"chief": ["c:1"], "worker": ["w:1"], "ps": ["p0:1", "p1:1"]}, "task": {"type": "worker", "index": 0}}"#;
    let e = err(cluster);
    assert!(
        e.starts_with("TF_CONFIG asks for parameter servers (a \"ps\" job of 2 in the cluster), but tessel has none: its replicas all-reduce their gradients every step"),
        "{e}"
    );
    assert!(
        e.contains("Remove the \"ps\" job from TF_CONFIG's cluster and start no \"ps\" task; run the chief and the workers as the processes of one MPI job (`mpirun -np <1 + workers>`)."),
        "{e}"
    );
    let e = err(&cluster.replace("\"type\": \"worker\"", "\"type\": \"ps\""));
    assert!(e.starts_with("TF_CONFIG asks for parameter servers"), "{e}");
}

#[test]
fn the_cluster_must_be_the_mpi_job() {
    let worker0 = TfConfig::parse(&with_task("worker", 0)).unwrap();
    assert_eq!(
        check_world(&worker0, HostWorld { rank: 1, size: 3 }),
        Ok(())
    );
    let chief = TfConfig::parse(&with_task("chief", 0)).unwrap();
    assert_eq!(check_world(&chief, HostWorld { rank: 0, size: 3 }), Ok(()));

    // A 3-task cluster in a one-process run, and in a job of 4.
    let e = check_world(&chief, HostWorld::ALONE)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("TF_CONFIG's cluster has 3 training tasks (1 chief + 2 workers), but the MPI job has 1 process: start one process per training task (`mpirun -np 3`), or list 1 training task in the cluster (a program joins the MPI job"),
        "{e}"
    );
    let e = check_world(&chief, HostWorld { rank: 0, size: 4 })
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "TF_CONFIG's cluster has 3 training tasks (1 chief + 2 workers), but the MPI job has 4 processes: start one process per training task (`mpirun -np 3`), or list 4 training tasks in the cluster"
    );
    // The task of another rank.
    let e = check_world(&worker0, HostWorld { rank: 2, size: 3 })
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "TF_CONFIG's task is worker 0, which is MPI rank 1, but this process is rank 2 of 3: give each process the task of its rank (chief = rank 0, worker i = rank i + 1; OpenMPI sets OMPI_COMM_WORLD_RANK)"
    );
    // The evaluator runs outside the job; local TF_CONFIG leaves the job alone.
    let evaluator = TfConfig::parse(&with_task("evaluator", 0)).unwrap();
    assert_eq!(check_world(&evaluator, HostWorld::ALONE), Ok(()));
    let e = check_world(&evaluator, HostWorld { rank: 3, size: 4 })
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("TF_CONFIG's task is evaluator 0, which takes no part in the training's collectives, but this process is rank 3 of an MPI job of 4"),
        "{e}"
    );
    assert_eq!(
        check_world(&TfConfig::local(), HostWorld { rank: 1, size: 4 }),
        Ok(())
    );
}

fn new_estimator(config: RunConfig) -> Result<TpuEstimator, EstimatorError> {
    TpuEstimator::new(
        tiny::model_fn,
        config,
        Params::new(),
        false,
        8,
        Some(8),
        None,
    )
}

#[test]
fn run_config_picks_up_tf_config() {
    let dir = temp_dir("tf_config_model_dir");
    let tf = TfConfig::parse(&format!(
        r#"{{"cluster": {{"chief": ["h:1"], "evaluator": ["e:1"]}}, "task": {{"type": "evaluator", "index": 0}}, "model_dir": "{}"}}"#,
        dir.display()
    ))
    .unwrap();
    // TF_CONFIG's model_dir fills RunConfig's.
    let est = new_estimator(RunConfig {
        tf_config: Some(tf.clone()),
        ..RunConfig::default()
    })
    .unwrap();
    assert_eq!(est.model_dir(), dir.as_path());
    let c = est.config();
    assert_eq!((c.task_type(), c.task_id()), (TaskType::Evaluator, 0));
    assert!(!c.is_chief());
    assert_eq!(c.num_worker_replicas(), 0);
    // Both set and different: TF's error.
    let e = new_estimator(RunConfig {
        model_dir: Some(dir.join("other")),
        tf_config: Some(tf),
        ..RunConfig::default()
    })
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.starts_with("`model_dir` provided in RunConfig construct, if set, must have the same value as the model_dir in TF_CONFIG."),
        "{e}"
    );
    // A cluster of two trainers is not this one process: refused before anything runs.
    let two = TfConfig::parse(
        r#"{"cluster": {"chief": ["h:1"], "worker": ["w:1"]}, "task": {"type": "chief", "index": 0}}"#,
    )
    .unwrap();
    let e = new_estimator(RunConfig {
        model_dir: Some(dir.to_path_buf()),
        tf_config: Some(two),
        ..RunConfig::default()
    })
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            EstimatorError::TfConfig(TfConfigError::WorldSize {
                tasks: 2,
                hosts: 1,
                ..
            })
        ),
        "{e}"
    );
    // Without TF_CONFIG, one local worker, the chief.
    if std::env::var_os("TF_CONFIG").is_some() {
        return;
    }
    let est = new_estimator(tiny::config(&dir, 5, 10)).unwrap();
    assert_eq!(est.config().tf_config, Some(TfConfig::local()));
    assert!(est.config().is_chief());
    assert_eq!(est.config().num_worker_replicas(), 1);
}
