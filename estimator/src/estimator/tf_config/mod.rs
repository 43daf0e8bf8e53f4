//! TF's `TF_CONFIG`: the cluster of a distributed training and this process's task in it,
//! read as `tf.estimator.RunConfig` reads it (`task_type`, `task_id`, `is_chief`,
//! `num_worker_replicas`, `model_dir`), with TF's errors.
//!
//! ```json
//! {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"], "evaluator": ["host2:2222"]},
//!  "task": {"type": "worker", "index": 0}}
//! ```
//!
//! tessel trains a cluster's chief and workers as the processes of one MPI job (chief = rank
//! 0, worker i = rank i + 1; [`world`] checks the two agree); the addresses are only counted.
//! An `evaluator` task is a process of its own that evaluates each new checkpoint
//! (`TpuEstimator::run_evaluator`). Parameter servers (`ps`) are refused: replicas all-reduce.

mod error;
mod parse;
mod world;

pub use error::TfConfigError;
pub use world::{check_world, HostWorld};

use std::collections::BTreeMap;
use std::path::PathBuf;

/// A task type of TF_CONFIG's cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskType {
    /// The one task that trains, saves checkpoints and writes summaries.
    Chief,
    /// TF's legacy name of the chief (a cluster has `chief` or `master`, not both).
    Master,
    /// A training task beside the chief.
    Worker,
    /// Continuous evaluation of the checkpoints the chief writes; not part of training.
    Evaluator,
    /// A parameter server: tessel has none, so a TF_CONFIG naming one is refused.
    Ps,
}

impl TaskType {
    /// TF's spelling: `chief`, `master`, `worker`, `evaluator`, `ps`.
    pub fn name(self) -> &'static str {
        match self {
            TaskType::Chief => "chief",
            TaskType::Master => "master",
            TaskType::Worker => "worker",
            TaskType::Evaluator => "evaluator",
            TaskType::Ps => "ps",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<TaskType> {
        [
            TaskType::Chief,
            TaskType::Master,
            TaskType::Worker,
            TaskType::Evaluator,
            TaskType::Ps,
        ]
        .into_iter()
        .find(|t| t.name() == name)
    }

    /// Whether tasks of this type train (take part in the step's collectives).
    pub fn trains(self) -> bool {
        matches!(self, TaskType::Chief | TaskType::Master | TaskType::Worker)
    }
}

impl std::fmt::Display for TaskType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// TF's `ClusterSpec`: each job's task addresses, in task-index order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterSpec {
    jobs: BTreeMap<TaskType, Vec<String>>,
}

impl ClusterSpec {
    /// A job's task addresses (empty for a job the cluster does not have).
    pub fn job_tasks(&self, task_type: TaskType) -> &[String] {
        self.jobs.get(&task_type).map_or(&[], Vec::as_slice)
    }

    /// The jobs with at least one task.
    pub fn jobs(&self) -> impl Iterator<Item = TaskType> + '_ {
        self.jobs.keys().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Chief (or master) plus workers: TF's `num_worker_replicas`.
    pub fn training_tasks(&self) -> usize {
        [TaskType::Chief, TaskType::Master, TaskType::Worker]
            .iter()
            .map(|t| self.job_tasks(*t).len())
            .sum()
    }
}

impl std::fmt::Display for ClusterSpec {
    /// The cluster as compact JSON, its jobs in the order chief, master, worker, evaluator.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let jobs: Vec<String> = self
            .jobs
            .iter()
            .map(|(t, tasks)| format!("\"{t}\":{}", serde_json::Value::from(tasks.clone())))
            .collect();
        write!(f, "{{{}}}", jobs.join(","))
    }
}

/// `TF_CONFIG` read: the cluster (empty when training locally) and this process's task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfConfig {
    pub cluster: ClusterSpec,
    pub task_type: TaskType,
    pub task_id: usize,
    /// TF_CONFIG's `model_dir`, which RunConfig's must equal when both are set.
    pub model_dir: Option<PathBuf>,
}

impl Default for TfConfig {
    fn default() -> Self {
        TfConfig::local()
    }
}

impl TfConfig {
    /// No cluster: one local worker, task 0, the chief (TF's local mode).
    pub fn local() -> TfConfig {
        TfConfig {
            cluster: ClusterSpec::default(),
            task_type: TaskType::Worker,
            task_id: 0,
            model_dir: None,
        }
    }

    /// Parses TF_CONFIG's JSON text, with TF's checks.
    pub fn parse(text: &str) -> Result<TfConfig, TfConfigError> {
        parse::parse(text)
    }

    /// The `TF_CONFIG` environment variable, parsed; `None` when it is unset or blank.
    pub fn from_env() -> Result<Option<TfConfig>, TfConfigError> {
        match std::env::var("TF_CONFIG") {
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(TfConfigError::NotUnicode),
            Ok(text) if text.trim().is_empty() => Ok(None),
            Ok(text) => TfConfig::parse(&text).map(Some),
        }
    }

    /// Whether a cluster is given (TF's distributed mode).
    pub fn is_distributed(&self) -> bool {
        !self.cluster.is_empty()
    }

    /// TF's `is_chief`: the chief (or master) task, or the one local task.
    pub fn is_chief(&self) -> bool {
        !self.is_distributed() || matches!(self.task_type, TaskType::Chief | TaskType::Master)
    }

    /// TF's `num_worker_replicas`: the training tasks (1 locally, 0 for the evaluator).
    pub fn num_worker_replicas(&self) -> usize {
        match (self.is_distributed(), self.task_type) {
            (false, _) => 1,
            (true, TaskType::Evaluator) => 0,
            (true, _) => self.cluster.training_tasks(),
        }
    }

    /// The MPI rank a training task runs as: the chief 0, worker i i + 1 (`None` for the
    /// evaluator, which is not part of the job).
    pub fn mpi_rank(&self) -> Option<usize> {
        match self.task_type {
            _ if !self.is_distributed() => Some(0),
            TaskType::Chief | TaskType::Master => Some(0),
            TaskType::Worker => Some(self.task_id + 1),
            TaskType::Evaluator | TaskType::Ps => None,
        }
    }

    /// `chief 0`, `worker 2`: the task as the errors and the log name it.
    pub fn task_name(&self) -> String {
        format!("{} {}", self.task_type, self.task_id)
    }
}

/// TF's `RunConfig` picks up TF_CONFIG: `config.tf_config` when set, else `from_env`'s;
/// TF_CONFIG's model_dir fills RunConfig's and must equal it when both are set; a cluster is
/// checked against `world`. Returns the config with `tf_config` set.
pub(crate) fn resolve(
    mut config: crate::RunConfig,
    from_env: impl FnOnce() -> Result<Option<TfConfig>, TfConfigError>,
    world: HostWorld,
) -> Result<crate::RunConfig, TfConfigError> {
    let tf = match config.tf_config.take() {
        Some(tf) => tf,
        None => from_env()?.unwrap_or_default(),
    };
    if let Some(dir) = &tf.model_dir {
        match &config.model_dir {
            Some(own) if own != dir => {
                return Err(TfConfigError::ModelDirDisagrees {
                    config: own.display().to_string(),
                    tf_config: dir.display().to_string(),
                })
            }
            _ => config.model_dir = Some(dir.clone()),
        }
    }
    check_world(&tf, world)?;
    config.tf_config = Some(tf);
    Ok(config)
}
