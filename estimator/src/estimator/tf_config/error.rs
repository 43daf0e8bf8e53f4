//! `TfConfigError`: a `TF_CONFIG` TF would refuse (TF's message where TF has one), one tessel
//! cannot run (parameter servers), or one the MPI job disagrees with.

use thiserror::Error;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TfConfigError {
    #[error("TF_CONFIG is not valid UTF-8")]
    NotUnicode,
    #[error(
        "TF_CONFIG is not valid JSON at byte {offset} (line {line}, column {column}): {message}"
    )]
    Json {
        offset: usize,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{what} in TF_CONFIG must be a JSON object, found {found}")]
    NotAnObject { what: String, found: String },
    #[error("job \"{job}\" of TF_CONFIG's cluster must be a list of \"host:port\" strings, found {found}")]
    JobNotAList { job: String, found: String },
    #[error("unknown task type \"{name}\" in TF_CONFIG's {place}: the task types are chief, worker and evaluator (and TF's master and ps)")]
    UnknownTaskType { name: String, place: &'static str },
    #[error("If \"cluster\" is set in TF_CONFIG, it must have one \"{chief}\" node.{workers}")]
    NoChief {
        chief: &'static str,
        workers: String,
    },
    #[error("The \"cluster\" in TF_CONFIG must have only one \"{chief}\" node (it has {count}).")]
    ManyChiefs { chief: &'static str, count: usize },
    #[error("If `master` node exists in `cluster`, job `chief` is not supported.")]
    ChiefAndMaster,
    #[error("If `master` node exists in `cluster`, task_type `evaluator` is not supported.")]
    EvaluatorWithMaster,
    #[error("If \"cluster\" is set in TF_CONFIG, task type must be set.")]
    NoTaskType,
    #[error("If \"cluster\" is set in TF_CONFIG, task index must be set.")]
    NoTaskIndex,
    #[error("Task index must be non-negative number (TF_CONFIG's task index is {found}).")]
    BadTaskIndex { found: String },
    #[error("{task_type} is not a valid task_type in the cluster_spec:\n{cluster}\n\nNote that these values may be coming from the TF_CONFIG environment variable.")]
    TaskTypeNotInCluster { task_type: String, cluster: String },
    #[error("{index} is not a valid task_id for task_type {task_type} in the cluster_spec:\n{cluster}\n\nNote that these values may be coming from the TF_CONFIG environment variable.")]
    IndexOutOfRange {
        index: usize,
        task_type: String,
        cluster: String,
    },
    #[error(
        "If \"cluster\" is not set in TF_CONFIG, task type must be WORKER (it is {task_type})."
    )]
    LocalNotWorker { task_type: String },
    #[error("If \"cluster\" is not set in TF_CONFIG, task index must be 0 (it is {index}).")]
    LocalIndexNotZero { index: usize },
    #[error("TF_CONFIG asks for parameter servers ({what}), but tessel has none: its replicas all-reduce their gradients every step (CrossShardOptimizer), as TPUEstimator's do. Remove the \"ps\" job from TF_CONFIG's cluster and start no \"ps\" task; run the chief and the workers as the processes of one MPI job (`mpirun -np <1 + workers>`).")]
    ParameterServers { what: String },
    #[error("model_dir in TF_CONFIG should be non-empty.")]
    EmptyModelDir,
    #[error("model_dir in TF_CONFIG must be a string, found {found}")]
    ModelDirNotAString { found: String },
    #[error("`model_dir` provided in RunConfig construct, if set, must have the same value as the model_dir in TF_CONFIG. model_dir: {config}\nTF_CONFIG[\"model_dir\"]: {tf_config}.")]
    ModelDirDisagrees { config: String, tf_config: String },
    /// Chief + workers is not the MPI job's size; the message says both and the fix.
    #[error("{message}")]
    WorldSize {
        tasks: usize,
        hosts: usize,
        message: String,
    },
    #[error("TF_CONFIG's task is {task}, which is MPI rank {expected}, but this process is rank {rank} of {hosts}: give each process the task of its rank (chief = rank 0, worker i = rank i + 1; OpenMPI sets OMPI_COMM_WORLD_RANK)")]
    WorldRank {
        task: String,
        expected: usize,
        rank: usize,
        hosts: usize,
    },
    #[error("TF_CONFIG's task is evaluator {index}, which takes no part in the training's collectives, but this process is rank {rank} of an MPI job of {hosts}: start the evaluator on its own, outside mpirun")]
    EvaluatorInJob {
        index: usize,
        rank: usize,
        hosts: usize,
    },
}
