//! `RunConfig` and `TpuConfig`: TPUEstimator's configuration, with TF's defaults and TF's
//! errors.

use crate::estimator::tf_config::{TaskType, TfConfig};
use std::path::PathBuf;
use thiserror::Error;

/// TF's `tpu_config.InputPipelineConfig`: how input_fn is called for training.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InputPipelineConfig {
    /// input_fn is called once per host and its batches are dealt to the shards in turn
    /// (PER_HOST_V1/V2; with one host, once).
    #[default]
    PerHost,
    /// input_fn is called once per shard, with `params["context"]`'s shard index
    /// (PER_SHARD_V1); each shard reads `dataset.shard(num_shards, index)` if it wants.
    PerShard,
}

/// TF's `tf.compat.v1.estimator.tpu.TPUConfig`.
#[derive(Clone, Debug, PartialEq)]
pub struct TpuConfig {
    /// Steps run in one compiled loop between host round trips (TF's default: 2).
    pub iterations_per_loop: u64,
    /// Replicas the step runs on (the shards of the batch). `None`: 1, as on a CPU host.
    pub num_shards: Option<usize>,
    pub per_host_input_for_training: InputPipelineConfig,
}

impl Default for TpuConfig {
    fn default() -> Self {
        TpuConfig {
            iterations_per_loop: 2,
            num_shards: None,
            per_host_input_for_training: InputPipelineConfig::PerHost,
        }
    }
}

/// The file format checkpoints are written in. Restoring reads either, whichever a prefix
/// has (tessel's file first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CheckpointFormat {
    /// `model.ckpt-N.safetensors` only.
    #[default]
    Safetensors,
    /// TF's tensor bundle only (`model.ckpt-N.index` and `model.ckpt-N.data-00000-of-00001`),
    /// which `tf.train.load_checkpoint` and TF's estimators read.
    Tf,
    /// Both, for the same step.
    Both,
}

impl CheckpointFormat {
    pub(crate) fn writes_safetensors(self) -> bool {
        matches!(self, CheckpointFormat::Safetensors | CheckpointFormat::Both)
    }

    pub(crate) fn writes_tf(self) -> bool {
        matches!(self, CheckpointFormat::Tf | CheckpointFormat::Both)
    }
}

impl std::str::FromStr for CheckpointFormat {
    type Err = String;

    /// `safetensors`, `tf` or `both` (a command-line flag's spelling).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "safetensors" => Ok(CheckpointFormat::Safetensors),
            "tf" => Ok(CheckpointFormat::Tf),
            "both" => Ok(CheckpointFormat::Both),
            other => Err(format!(
                "unknown checkpoint format `{other}`: safetensors, tf or both"
            )),
        }
    }
}

/// TF's `tf.compat.v1.estimator.tpu.RunConfig`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// Where checkpoints and events go; `None` is a new temporary directory, printed.
    pub model_dir: Option<PathBuf>,
    pub tpu_config: TpuConfig,
    /// Save a checkpoint every N steps (at the end of the loop that reaches it).
    pub save_checkpoints_steps: Option<u64>,
    /// Save a checkpoint every N seconds; TF's default is 600 when neither is set.
    pub save_checkpoints_secs: Option<u64>,
    /// Keep at most N checkpoints; 0 keeps all. TF's default: 5.
    pub keep_checkpoint_max: usize,
    /// Write summaries every N steps. TF's default: 100.
    pub save_summary_steps: u64,
    /// Log `loss = ..., step = ...` and `global_step/sec` every N steps. TF's default: 100.
    pub log_step_count_steps: u64,
    /// Seeds variable initializers and device randomness; `None`: a seed drawn per process.
    pub tf_random_seed: Option<i64>,
    /// When the latest checkpoint does not read back (a checksum mismatch, a truncated file),
    /// restore the newest older one that does, with a warning. Off by default: the damage is
    /// an error that lists the intact checkpoints, and the user chooses.
    pub fall_back_to_intact_checkpoint: bool,
    /// The format checkpoints are written in (tessel's safetensors by default).
    pub checkpoint_format: CheckpointFormat,
    /// The cluster and this process's task (TF's `TF_CONFIG`). `None`: `TpuEstimator::new`
    /// reads the `TF_CONFIG` environment variable, as TF's `RunConfig` does (unset: one
    /// local worker, the chief); the estimator's config then holds what it read.
    pub tf_config: Option<TfConfig>,
    /// Training on several hosts (an MPI job): the gradients' all-reduce sums over every host
    /// go through MPI's own all-reduce, which adds the hosts' partial sums in an order of its
    /// own (faster; not bitwise the one-process result, so checkpoints differ in the last
    /// bits). Off by default; every host must set the same. No effect in one process.
    pub fast_allreduce: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            model_dir: None,
            tpu_config: TpuConfig::default(),
            save_checkpoints_steps: None,
            save_checkpoints_secs: None,
            keep_checkpoint_max: 5,
            save_summary_steps: 100,
            log_step_count_steps: 100,
            tf_random_seed: None,
            fall_back_to_intact_checkpoint: false,
            checkpoint_format: CheckpointFormat::Safetensors,
            tf_config: None,
            fast_allreduce: false,
        }
    }
}

/// A configuration TF would refuse, with TF's message.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.")]
    BothCheckpointIntervals,
    #[error("iterations_per_loop must be positive, given: {0}")]
    IterationsPerLoop(u64),
    #[error("num_shards must be positive, given: 0")]
    NumShards,
    #[error("{what} must be positive, given: 0")]
    ZeroInterval { what: &'static str },
}

/// When checkpoints are saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointInterval {
    Steps(u64),
    Secs(u64),
}

impl RunConfig {
    /// Checks what TF's `RunConfig` checks.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.save_checkpoints_steps.is_some() && self.save_checkpoints_secs.is_some() {
            return Err(ConfigError::BothCheckpointIntervals);
        }
        if self.tpu_config.iterations_per_loop == 0 {
            return Err(ConfigError::IterationsPerLoop(0));
        }
        if self.tpu_config.num_shards == Some(0) {
            return Err(ConfigError::NumShards);
        }
        for (what, v) in [
            ("save_checkpoints_steps", self.save_checkpoints_steps),
            ("save_checkpoints_secs", self.save_checkpoints_secs),
            ("save_summary_steps", Some(self.save_summary_steps)),
            ("log_step_count_steps", Some(self.log_step_count_steps)),
        ] {
            if v == Some(0) {
                return Err(ConfigError::ZeroInterval { what });
            }
        }
        Ok(())
    }

    /// The checkpoint interval in force: steps, secs, or TF's default of 600 s.
    pub fn checkpoint_interval(&self) -> CheckpointInterval {
        match (self.save_checkpoints_steps, self.save_checkpoints_secs) {
            (Some(steps), _) => CheckpointInterval::Steps(steps),
            (None, Some(secs)) => CheckpointInterval::Secs(secs),
            (None, None) => CheckpointInterval::Secs(600),
        }
    }

    /// The number of shards (replicas) the step runs on.
    pub fn num_shards(&self) -> usize {
        self.tpu_config.num_shards.unwrap_or(1)
    }

    /// TF's `task_type`: TF_CONFIG's task (a local worker without one).
    pub fn task_type(&self) -> TaskType {
        self.tf_config
            .as_ref()
            .map_or(TaskType::Worker, |t| t.task_type)
    }

    /// TF's `task_id`.
    pub fn task_id(&self) -> usize {
        self.tf_config.as_ref().map_or(0, |t| t.task_id)
    }

    /// TF's `is_chief`.
    pub fn is_chief(&self) -> bool {
        self.tf_config.as_ref().is_none_or(TfConfig::is_chief)
    }

    /// TF's `num_worker_replicas`: the training tasks of the cluster (1 locally).
    pub fn num_worker_replicas(&self) -> usize {
        self.tf_config
            .as_ref()
            .map_or(1, TfConfig::num_worker_replicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_tfs() {
        let c = RunConfig::default();
        assert_eq!(c.tpu_config.iterations_per_loop, 2);
        assert_eq!(c.keep_checkpoint_max, 5);
        assert_eq!(c.save_summary_steps, 100);
        assert_eq!(c.log_step_count_steps, 100);
        assert_eq!(c.checkpoint_interval(), CheckpointInterval::Secs(600));
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.checkpoint_format, CheckpointFormat::Safetensors);
    }

    #[test]
    fn checkpoint_formats_parse_from_their_flag_spelling() {
        for (text, format, safetensors, tf) in [
            ("safetensors", CheckpointFormat::Safetensors, true, false),
            ("tf", CheckpointFormat::Tf, false, true),
            ("both", CheckpointFormat::Both, true, true),
        ] {
            let parsed: CheckpointFormat = text.parse().unwrap();
            assert_eq!(parsed, format);
            assert_eq!(
                (parsed.writes_safetensors(), parsed.writes_tf()),
                (safetensors, tf)
            );
        }
        let e = "TF".parse::<CheckpointFormat>().unwrap_err();
        assert!(e.contains("safetensors, tf or both"), "{e}");
    }

    #[test]
    fn both_intervals_is_tfs_error() {
        let c = RunConfig {
            save_checkpoints_steps: Some(100),
            save_checkpoints_secs: Some(60),
            ..RunConfig::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set."
        );
    }
}
