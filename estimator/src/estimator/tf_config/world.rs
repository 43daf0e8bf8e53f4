//! TF_CONFIG against the MPI job: the chief and the workers are the job's processes, the
//! chief rank 0 and worker i rank i + 1; the evaluator is no part of it.

use super::{TaskType, TfConfig, TfConfigError};

/// This process's place among the processes of an MPI job: rank `rank` of `size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostWorld {
    pub rank: usize,
    pub size: usize,
}

impl HostWorld {
    /// One process, no MPI job.
    pub const ALONE: HostWorld = HostWorld { rank: 0, size: 1 };

    /// The MPI job this process joined (`MpiWorld::init_from_env`, the `mpi` feature); one
    /// process otherwise.
    pub fn current() -> HostWorld {
        match tessel_runtime::session::job_hosts() {
            Some((rank, size)) => HostWorld { rank, size },
            None => HostWorld::ALONE,
        }
    }
}

/// Checks that `tf`'s cluster is `world`: as many training tasks as processes, and this
/// task's rank this process's. Without a cluster there is nothing to check (the MPI job alone
/// says who trains). A pure function: the caller passes the world.
pub fn check_world(tf: &TfConfig, world: HostWorld) -> Result<(), TfConfigError> {
    if !tf.is_distributed() {
        return Ok(());
    }
    if tf.task_type == TaskType::Evaluator {
        if world.size > 1 {
            return Err(TfConfigError::EvaluatorInJob {
                index: tf.task_id,
                rank: world.rank,
                hosts: world.size,
            });
        }
        return Ok(());
    }
    let tasks = tf.cluster.training_tasks();
    if tasks != world.size {
        let chief = if tf.cluster.job_tasks(TaskType::Master).is_empty() {
            "chief"
        } else {
            "master"
        };
        let hint = if world.size == 1 {
            " (a program joins the MPI job before making its estimator: `MpiWorld::init_from_env`, built with the `mpi` feature)"
        } else {
            ""
        };
        return Err(TfConfigError::WorldSize {
            tasks,
            hosts: world.size,
            message: format!(
                "TF_CONFIG's cluster has {tasks} training tasks (1 {chief} + {}), but the MPI job has {}: start one process per training task (`mpirun -np {tasks}`), or list {} in the cluster{hint}",
                plural(tf.cluster.job_tasks(TaskType::Worker).len(), "worker", "workers"),
                plural(world.size, "process", "processes"),
                plural(world.size, "training task", "training tasks"),
            ),
        });
    }
    // A training task always has a rank.
    let expected = tf.mpi_rank().unwrap_or(0);
    if expected != world.rank {
        return Err(TfConfigError::WorldRank {
            task: tf.task_name(),
            expected,
            rank: world.rank,
            hosts: world.size,
        });
    }
    Ok(())
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
