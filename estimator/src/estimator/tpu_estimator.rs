//! `TpuEstimator::new` and what train, evaluate and predict share.

use super::log::Log;
use super::params::Params;
use super::trace_step::ModelFn;
use crate::config::RunConfig;
use crate::error::EstimatorError;
use crate::model::Mode;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tessel_runtime::session::{Backend, Device, ThreadBudget};

/// TPUEstimator's `TPUEstimator(model_fn, config, params, use_tpu, train_batch_size,
/// eval_batch_size, predict_batch_size)`.
pub struct TpuEstimator {
    pub(crate) model_fn: Arc<ModelFn>,
    pub(crate) config: RunConfig,
    pub(crate) params: Params,
    pub(crate) use_tpu: bool,
    pub(crate) train_batch_size: usize,
    pub(crate) eval_batch_size: Option<usize>,
    pub(crate) predict_batch_size: Option<usize>,
    pub(crate) model_dir: PathBuf,
    pub(crate) backend: Backend,
    /// Compute threads of every program (`TESSEL_THREADS`, else every core), as for
    /// `tessel run`.
    pub(crate) threads: ThreadBudget,
    /// Raised by [`TpuEstimator::stop_flag`]'s holder (a program's Ctrl-C or SIGTERM
    /// handler): training stops after the running loop, with a checkpoint.
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) quiet: bool,
    /// Where a model_dir without a checkpoint takes its first values (TF's `warm_start_from`).
    pub(crate) warm_start: Option<crate::checkpoint::WarmStart>,
    /// Told training's progress after each loop (a program's progress bar).
    pub(crate) progress: Option<super::log::ProgressFn>,
}

impl TpuEstimator {
    /// Checks what TPUEstimator checks: the config, reserved params keys, and that every
    /// batch size divides by the number of replicas (TF's messages). Reads `TF_CONFIG` when
    /// `config.tf_config` is `None` (`tf_config`), and checks its cluster against the MPI
    /// job. With no model_dir (here or in TF_CONFIG), a new temporary directory is used and
    /// logged.
    pub fn new(
        model_fn: impl Fn(
                &mut crate::model::Graph,
                &super::spec::Features,
                Option<&tessel_compiler::trace::Tensor>,
                Mode,
                &Params,
            ) -> Result<super::spec::TpuEstimatorSpec, EstimatorError>
            + Send
            + Sync
            + 'static,
        config: RunConfig,
        params: Params,
        use_tpu: bool,
        train_batch_size: usize,
        eval_batch_size: Option<usize>,
        predict_batch_size: Option<usize>,
    ) -> Result<TpuEstimator, EstimatorError> {
        config.validate()?;
        // TF_CONFIG, as TF's RunConfig reads it, checked against the MPI job.
        let config = super::tf_config::resolve(
            config,
            super::tf_config::TfConfig::from_env,
            super::tf_config::HostWorld::current(),
        )?;
        if !params.reserved_keys_used().is_empty() {
            // TF's text: the whole reserved list and the params dict, as Python prints them.
            let keys: Vec<String> = super::params::RESERVED_KEYS
                .iter()
                .map(|k| format!("'{k}'"))
                .collect();
            let shown: Vec<String> = params.iter().map(|(k, v)| format!("'{k}': {v}")).collect();
            return Err(EstimatorError::value(format!(
                "[{}] are reserved keys but existed in params {{{}}}.",
                keys.join(", "),
                shown.join(", ")
            )));
        }
        let replicas = if use_tpu { config.num_shards() } else { 1 };
        for (what, size) in [
            ("train", Some(train_batch_size)),
            ("eval", eval_batch_size),
            ("predict", predict_batch_size),
        ] {
            if let Some(size) = size {
                if size == 0 || size % replicas != 0 {
                    return Err(EstimatorError::value(format!(
                        "{what} batch size {size} must be divisible by number of replicas {replicas}"
                    )));
                }
            }
        }
        let threads = ThreadBudget::from_env().map_err(|e| EstimatorError::value(e.to_string()))?;
        let (model_dir, temporary) = match &config.model_dir {
            Some(dir) => (dir.clone(), false),
            None => (temporary_model_dir()?, true),
        };
        let estimator = TpuEstimator {
            model_fn: Arc::new(model_fn),
            config,
            params,
            use_tpu,
            train_batch_size,
            eval_batch_size,
            predict_batch_size,
            model_dir,
            backend: Backend::Jit,
            threads,
            stop: Arc::new(AtomicBool::new(false)),
            quiet: false,
            warm_start: None,
            progress: None,
        };
        if temporary {
            Log::new(false).warn(format!(
                "Using temporary folder as model directory: {}",
                estimator.model_dir.display()
            ));
        }
        Ok(estimator)
    }

    /// Runs on the reference interpreter instead of the JIT (slow; for checking the JIT).
    pub fn with_backend(mut self, backend: Backend) -> TpuEstimator {
        self.backend = backend;
        self
    }

    /// TF's `warm_start_from`: when the model_dir has no checkpoint yet, the variables the
    /// warm start matches take its values; the others are initialized. A model_dir with a
    /// checkpoint restores it and ignores the warm start, as TF does.
    pub fn with_warm_start(mut self, warm_start: crate::checkpoint::WarmStart) -> TpuEstimator {
        self.warm_start = Some(warm_start);
        self
    }

    /// Calls `progress` after each training loop (and once when `train` ends) with the step,
    /// the loss and the throughput: the examples draw their progress bar with it. The library
    /// draws nothing itself.
    pub fn with_progress(
        mut self,
        progress: impl Fn(&super::log::Progress) + Send + Sync + 'static,
    ) -> TpuEstimator {
        self.progress = Some(std::sync::Arc::new(progress));
        self
    }

    /// Keeps the log lines in memory only, not passing them to the `log` facade (tests).
    pub fn quiet(mut self) -> TpuEstimator {
        self.quiet = true;
        self
    }

    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }

    /// The global batch sizes given to `new`: train, eval, predict.
    pub fn batch_sizes(&self) -> (usize, Option<usize>, Option<usize>) {
        (
            self.train_batch_size,
            self.eval_batch_size,
            self.predict_batch_size,
        )
    }

    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// A flag that stops training after the running loop: the checkpoint of the step reached
    /// is saved and `train` returns [`EstimatorError::Interrupted`]; `evaluate` stops between
    /// loops with [`EstimatorError::Stopped`]. The library installs no signal handler: a
    /// program raises this flag from its own (the MNIST example does on Ctrl-C and SIGTERM).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Replicas the step runs on: `num_shards` with `use_tpu`, else 1 (the guide's local run).
    pub fn replicas(&self) -> usize {
        if self.use_tpu {
            self.config.num_shards()
        } else {
            1
        }
    }

    /// The device the programs run on.
    pub(crate) fn device(&self) -> Device {
        let mut device = Device::new(self.backend).with_replicas(self.replicas());
        device.threads = self.threads;
        // XLA_FLAGS=--xla_dump_to: the device dumps its passes and CLIF there too.
        device.dump_to = super::dump::dump_dir();
        // XLA_FLAGS=--xla_disable_hlo_passes: passes the user turned off.
        device.disabled_passes = super::disabled_passes::from_env();
        device
    }

    /// `params` for host `hosts.index`'s input_fn on several hosts (TF's PER_HOST_V1):
    /// `batch_size` is the per-host batch of `global_batch`, `context` the host.
    pub(crate) fn params_for_host_input(
        &self,
        global_batch: usize,
        hosts: super::hosts::Hosts,
    ) -> Params {
        self.params
            .with_batch_size(global_batch / hosts.count)
            .for_input_host(hosts.index, hosts.count)
    }

    /// TF's `is_chief`: whether this process writes the model_dir and evaluates, predicts
    /// and exports. In an MPI job of several hosts only host 0 is; otherwise always.
    pub fn is_chief(&self) -> bool {
        super::hosts::Hosts::of_job().is_chief()
    }

    /// The device of evaluate, predict and export: the chief's alone, every shard in this
    /// process (its runs take no part in a job of several hosts); on another host, an error.
    pub(crate) fn chief_device(&self, what: &str) -> Result<Device, EstimatorError> {
        let hosts = super::hosts::Hosts::of_job();
        if !hosts.is_chief() {
            return Err(EstimatorError::value(format!(
                "{what} runs on the chief (host 0) only, but this is host {} of {}: call it where is_chief() holds",
                hosts.index, hosts.count
            )));
        }
        Ok(self.device().on_this_host())
    }

    /// `params` with `batch_size` set to the per-shard batch of `global_batch`.
    pub(crate) fn params_for(&self, global_batch: usize) -> Params {
        self.params.with_batch_size(global_batch / self.replicas())
    }
}

fn temporary_model_dir() -> Result<PathBuf, EstimatorError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("tessel_estimator_{}_{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| EstimatorError::Write {
        what: format!("the temporary model_dir {}", dir.display()),
        message: e.to_string(),
    })?;
    Ok(dir)
}
