//! The trainer's lock on a model_dir: one trainer at a time.
//!
//! `train` holds an exclusive advisory lock (`flock`) on `model_dir/trainer.lock` while it
//! runs, and writes its holder (pid, host, start time) into the file. A second trainer fails
//! at once with the holder's name. The operating system drops the lock when its process
//! dies, however it dies, so a stale lock never blocks: the next trainer takes it over and
//! reports whose it was (the file still names the dead holder). Evaluators and predictors
//! take no lock: they only read.
//!
//! TF has no such lock: two trainers in one model_dir both run there, and the last writer
//! of each checkpoint wins.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The lock file's name in a model_dir.
pub(crate) const LOCK_FILE: &str = "trainer.lock";

#[derive(Debug, Error)]
pub enum LockError {
    #[error("another trainer is using {}: {holder}. Two trainers in one model_dir would overwrite each other's checkpoints; wait for it, stop it, or give this run another model_dir", model_dir.display())]
    Held { model_dir: PathBuf, holder: String },
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A held lock; released when dropped.
#[derive(Debug)]
pub struct ModelDirLock {
    file: File,
    /// The holder of a lock that was taken over from a process that died holding it.
    stale: Option<String>,
}

impl ModelDirLock {
    /// Takes `model_dir`'s trainer lock (creating the model_dir), or fails naming its holder.
    pub fn acquire(model_dir: &Path) -> Result<ModelDirLock, LockError> {
        let path = model_dir.join(LOCK_FILE);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(model_dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = read_holder(&mut file).unwrap_or_default();
                return Err(LockError::Held {
                    model_dir: model_dir.to_path_buf(),
                    holder: if holder.is_empty() {
                        "a process that has not yet written its name".to_string()
                    } else {
                        holder
                    },
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        // A holder still named in the file let go only by dying.
        let previous = read_holder(&mut file).map_err(io)?;
        let stale = (!previous.is_empty()).then_some(previous);
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        file.write_all(this_holder().as_bytes()).map_err(io)?;
        file.sync_data().map_err(io)?;
        Ok(ModelDirLock { file, stale })
    }

    /// The dead holder whose lock this one took over, as its file named it.
    pub(crate) fn taken_over_from(&self) -> Option<&str> {
        self.stale.as_deref()
    }
}

impl Drop for ModelDirLock {
    fn drop(&mut self) {
        // Cleared before the unlock (at close), so the next holder finds it empty: a clean
        // release is no stale lock. Failing to clear only makes the next trainer say the
        // lock was stale.
        self.file.set_len(0).ok();
    }
}

fn read_holder(file: &mut File) -> std::io::Result<String> {
    let mut text = String::new();
    file.rewind()?;
    file.read_to_string(&mut text)?;
    Ok(text.trim().to_string())
}

/// `pid 1234 on host NAME, started 2026-11-27T10:26:27 UTC`.
fn this_holder() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "pid {} on host {host}, started {} UTC\n",
        std::process::id(),
        crate::estimator::log::utc_iso(now)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_a_clean_release_is_not_stale() {
        let dir = std::env::temp_dir().join(format!("tessel-lock-{}", std::process::id()));
        let first = ModelDirLock::acquire(&dir).unwrap();
        assert_eq!(first.taken_over_from(), None);
        let e = ModelDirLock::acquire(&dir).unwrap_err().to_string();
        assert!(e.contains("another trainer is using"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        drop(first);
        let again = ModelDirLock::acquire(&dir).unwrap();
        assert_eq!(again.taken_over_from(), None);
        drop(again);
        std::fs::remove_dir_all(&dir).ok();
    }
}
