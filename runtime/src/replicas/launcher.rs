//! Whether an MPI launcher (`mpirun`, `srun` with PMI) started this process, and the warning
//! for a process that a launcher started among several but that runs alone: built without
//! the `mpi` feature, or never joining the job, each process would run every replica by
//! itself and train its own model, silently.

use super::placement;

/// The environment variables a launcher sets: the size of the job.
const LAUNCHER_SIZE_VARS: [&str; 2] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"];

/// Whether a launcher (`mpirun`, `srun` with PMI) started this process.
pub fn launched_by_mpi() -> bool {
    LAUNCHER_SIZE_VARS
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// The warning for this process when a launcher started it among several processes but it
/// takes no part in their job; `None` when it does, or when no launcher started it.
pub fn alone_under_launcher() -> Option<String> {
    alone_warning(
        |v| std::env::var(v).ok(),
        cfg!(feature = "mpi"),
        placement::hosts().is_some(),
    )
}

/// [`alone_under_launcher`] for the environment `env`, a build with or without the `mpi`
/// feature, and a process that `joined` the job or not.
fn alone_warning(
    env: impl Fn(&str) -> Option<String>,
    built_with_mpi: bool,
    joined: bool,
) -> Option<String> {
    let (var, size) = LAUNCHER_SIZE_VARS
        .iter()
        .find_map(|&v| env(v).map(|size| (v, size)))?;
    // A job of one process runs alone anyway; a size that does not parse still warns.
    if size.trim().parse::<usize>().is_ok_and(|n| n <= 1) || joined {
        return None;
    }
    let why = if built_with_mpi {
        "this program did not join the MPI job (MpiWorld::init_from_env)"
    } else {
        "this binary was built without the `mpi` feature (build it with `--features mpi`)"
    };
    Some(format!(
        "a launcher started this process as one of an MPI job ({var}={size}), but {why}: \
         every process runs all the replicas alone, and they share nothing"
    ))
}

#[cfg(test)]
mod tests {
    use super::alone_warning;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_launcher_without_the_feature_warns() {
        let w = alone_warning(env(&[("OMPI_COMM_WORLD_SIZE", "2")]), false, false).unwrap();
        assert!(w.contains("OMPI_COMM_WORLD_SIZE=2"), "{w}");
        assert!(w.contains("without the `mpi` feature"), "{w}");
        let w = alone_warning(env(&[("PMI_SIZE", "4")]), false, false).unwrap();
        assert!(w.contains("PMI_SIZE=4"), "{w}");
    }

    #[test]
    fn a_program_that_did_not_join_warns() {
        let w = alone_warning(env(&[("PMI_SIZE", "2")]), true, false).unwrap();
        assert!(w.contains("did not join the MPI job"), "{w}");
        assert_eq!(alone_warning(env(&[("PMI_SIZE", "2")]), true, true), None);
    }

    #[test]
    fn no_launcher_or_a_job_of_one_is_quiet() {
        assert_eq!(alone_warning(env(&[]), false, false), None);
        assert_eq!(
            alone_warning(env(&[("OMPI_COMM_WORLD_SIZE", "1")]), false, false),
            None
        );
        assert!(alone_warning(env(&[("PMI_SIZE", "many")]), false, false).is_some());
    }
}
