//! The run's random seed, kept in the model_dir, so a resumed run draws what the run it
//! resumes would have drawn even when no `tf_random_seed` was given.
//!
//! Dropout's bits depend on the graph seed, the global step and the replica. With a
//! `tf_random_seed` the seed is the same in every process; without one, TF (and tessel
//! before this file) drew a new seed per process, so two resumes of one checkpoint trained
//! differently. The first `train` of a model_dir without `tf_random_seed` draws the seed
//! once and writes it to `model_dir/random_seed` (durably, before its first checkpoint);
//! every later `train` there reads it back. A given `tf_random_seed` always wins.

use super::saver::CheckpointError;
use crate::model::random::process_seed;
use std::path::Path;
use tessel_runtime::durable::write_durably;

/// The seed file's name in a model_dir.
pub(crate) const SEED_FILE: &str = "random_seed";

/// The seed a `train` in `model_dir` uses: `configured`, else the one kept in the model_dir,
/// else a new one drawn now and kept there. Call it holding the model_dir's trainer lock.
pub(crate) fn run_seed(model_dir: &Path, configured: Option<i64>) -> Result<i64, CheckpointError> {
    if let Some(seed) = configured {
        return Ok(seed);
    }
    let path = model_dir.join(SEED_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<i64>().map_err(|_| CheckpointError::Content {
            path: path.clone(),
            message: format!(
                "it should hold the run's random seed (an integer), but holds {:?}; delete it to draw a new one (a resumed run then draws other dropout masks)",
                text.trim()
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let seed = process_seed();
            write_durably(&path, format!("{seed}\n").as_bytes()).map_err(|source| {
                CheckpointError::Io {
                    what: "write",
                    path,
                    source,
                }
            })?;
            Ok(seed)
        }
        Err(source) => Err(CheckpointError::Io {
            what: "read",
            path,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_once_then_kept_and_a_configured_seed_wins() {
        let dir = std::env::temp_dir().join(format!("tessel-run-seed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = run_seed(&dir, None).unwrap();
        std::fs::write(dir.join(SEED_FILE), "12345\n").unwrap();
        assert_eq!(run_seed(&dir, None).unwrap(), 12345);
        assert_eq!(run_seed(&dir, Some(7)).unwrap(), 7);
        assert_eq!(first, process_seed());
        std::fs::write(dir.join(SEED_FILE), "not a number").unwrap();
        let e = run_seed(&dir, None).unwrap_err().to_string();
        assert!(e.contains("random seed"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
