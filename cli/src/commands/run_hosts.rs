//! `tessel run` in an MPI job (the `mpi` feature, under `mpirun`): every host joins the job,
//! runs its block of the replicas, and the chief (host 0) alone writes the outputs, which are
//! every replica's (the runtime gathers them). A failure on any host ends every host's run;
//! each reports its error, then the job ends.

use std::path::Path;
use std::process::ExitCode;
use tessel_compiler::ir::Array;
use tessel_runtime::host_io::write_safetensors;

/// This process's place in an MPI job: `None` without one.
pub struct Hosts {
    #[cfg(feature = "mpi")]
    world: Option<&'static tessel_runtime::session::MpiWorld>,
}

impl Hosts {
    /// Joins the MPI job this process was started in, if any.
    pub fn join() -> Result<Hosts, String> {
        let hosts = Hosts::join_job()?;
        if let Some(warning) = tessel_runtime::session::alone_under_launcher() {
            log::warn!(target: "tessel", "{warning}");
        }
        Ok(hosts)
    }

    fn join_job() -> Result<Hosts, String> {
        #[cfg(feature = "mpi")]
        {
            use tessel_runtime::session::{timeout_from_env, MpiWorld as World};
            let world = World::init_from_env(timeout_from_env()?)?;
            Ok(Hosts { world })
        }
        #[cfg(not(feature = "mpi"))]
        Ok(Hosts {})
    }

    /// "host h: " in a job of several hosts, so each host's lines can be told apart.
    fn prefix(&self) -> String {
        match tessel_runtime::session::job_hosts() {
            Some((rank, _)) => format!("host {rank}: "),
            None => String::new(),
        }
    }

    /// Reports the outcome and leaves the job (after a failure, ending it on every host).
    pub fn finish(self, outcome: Result<(), String>) -> ExitCode {
        let code = match &outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => super::fail(format!("{}{message}", self.prefix())),
        };
        #[cfg(feature = "mpi")]
        if let Some(world) = self.world {
            world.finish(outcome.as_ref().err().map(String::as_str));
        }
        code
    }
}

/// Refuses a replica count that does not split evenly over the hosts, before any work.
pub fn check_split(replicas: usize) -> Result<(), String> {
    tessel_runtime::session::Placement::of_run(replicas).map(drop)
}

/// Writes the outputs, on the chief only when several hosts run.
pub fn write_outputs(path: &Path, outputs: &[(String, Array)]) -> Result<(), String> {
    match tessel_runtime::session::job_hosts() {
        Some((rank, _)) if rank != 0 => Ok(()),
        _ => write_safetensors(path, outputs).map_err(|e| e.to_string()),
    }
}
