//! Durable file writes: a file either keeps its old content or has its new content whole,
//! after a crash or a power loss.
//!
//! [`write_durably`] writes a temporary file beside the target (`NAME.tmpPID`), fsyncs it,
//! renames it over the target and fsyncs the directory, so the rename itself survives a power
//! loss. Without the two fsyncs a crash soon after the rename can leave a zero-length or
//! partly written file under the target's name (ext4's delayed allocation does exactly that).
//!
//! A save killed between its write and its rename leaves its temporary behind;
//! [`leftover_temporaries`] finds them so the next writer of the directory can remove them.
//!
//! **Fault injection**, for tests that stop a save at each step without tracing system calls;
//! both do nothing when unset:
//! - `TESSEL_FAULT_KILL_AT=POINT:N` kills the process with SIGKILL at the Nth time (from 1)
//!   any durable write reaches POINT: `written` (the temporary is complete and synced, not
//!   renamed), `renamed` (renamed, the directory not yet synced).
//! - `TESSEL_FAULT_NO_SPACE_AT=N` makes the Nth durable write find the disk full: half its
//!   bytes reach the temporary, then the write fails with ENOSPC, as on a full filesystem.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable of the kill points.
pub const FAULT_VARIABLE: &str = "TESSEL_FAULT_KILL_AT";
/// The environment variable of the full-disk point.
pub const NO_SPACE_VARIABLE: &str = "TESSEL_FAULT_NO_SPACE_AT";

/// Writes `bytes` to `path` durably: temporary file, fsync, rename, fsync of the directory.
/// On an error the temporary is removed and `path` keeps its previous content.
pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temporary_for(path);
    let written = (|| {
        let mut file = File::create(&tmp)?;
        if disk_full_here() {
            file.write_all(&bytes[..bytes.len() / 2])?;
            return Err(std::io::Error::from_raw_os_error(libc_enospc()));
        }
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        std::fs::remove_file(&tmp).ok();
        return Err(e);
    }
    fault_point("written");
    if let Err(e) = std::fs::rename(&tmp, path) {
        std::fs::remove_file(&tmp).ok();
        return Err(e);
    }
    fault_point("renamed");
    sync_parent(path)
}

/// Fsyncs the directory that holds `path`, so a rename or a new name in it is durable.
pub(crate) fn sync_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => sync_dir(Path::new(".")),
    }
}

/// Fsyncs a directory (its entries: names created, renamed or removed in it).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Fsyncs every file under `dir`, then every directory bottom-up: before a directory written
/// in place is renamed into view (an export), so what the new name shows is on disk.
pub fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            sync_tree(&path)?;
        } else {
            File::open(&path)?.sync_all()?;
        }
    }
    sync_dir(dir)
}

/// The temporary a durable write of `path` uses: `NAME.tmpPID` beside it.
pub(crate) fn temporary_for(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    PathBuf::from(tmp)
}

/// Whether a file name is a durable write's temporary (`NAME.tmpPID`).
pub(crate) fn is_temporary_name(name: &str) -> bool {
    match name.rfind(".tmp") {
        Some(at) => {
            let pid = &name[at + 4..];
            at > 0 && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// The temporaries that interrupted durable writes left in `dir`, sorted. Only the caller
/// knows whether another writer may still be using one (hold the directory's lock first).
pub fn leftover_temporaries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_file() && entry.file_name().to_str().is_some_and(is_temporary_name)
        {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// Kills the process at the Nth arrival at `point` when `TESSEL_FAULT_KILL_AT=point:N`.
fn fault_point(point: &str) {
    static ARRIVALS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
    let Ok(spec) = std::env::var(FAULT_VARIABLE) else {
        return;
    };
    let Some((at, n)) = spec.split_once(':') else {
        return;
    };
    let slot = match point {
        "written" => 0,
        _ => 1,
    };
    let arrivals = ARRIVALS[slot].fetch_add(1, Ordering::SeqCst) + 1;
    if at == point && n.trim().parse::<u64>() == Ok(arrivals) {
        kill_self();
    }
}

/// Whether this durable write is the Nth of `TESSEL_FAULT_NO_SPACE_AT=N`.
fn disk_full_here() -> bool {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let Ok(n) = std::env::var(NO_SPACE_VARIABLE) else {
        return false;
    };
    let write = WRITES.fetch_add(1, Ordering::SeqCst) + 1;
    n.trim().parse::<u64>() == Ok(write)
}

#[cfg(target_os = "linux")]
fn libc_enospc() -> i32 {
    libc::ENOSPC
}

#[cfg(not(target_os = "linux"))]
fn libc_enospc() -> i32 {
    28
}

#[cfg(target_os = "linux")]
fn kill_self() {
    // SAFETY: kill(2) on this process's own id; SIGKILL cannot be caught, so this does not
    // return.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

#[cfg(not(target_os = "linux"))]
fn kill_self() {
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_whole_files_and_leave_no_temporary() {
        let dir = tempdir();
        let path = dir.join("state");
        write_durably(&path, b"one").unwrap();
        write_durably(&path, b"two, longer").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two, longer");
        assert!(leftover_temporaries(&dir).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn temporaries_are_recognized_by_name() {
        assert!(is_temporary_name("model.ckpt-5.safetensors.tmp1234"));
        assert!(is_temporary_name("checkpoint.tmp7"));
        assert!(!is_temporary_name("checkpoint"));
        assert!(!is_temporary_name("model.tmp"));
        assert!(!is_temporary_name(".tmp12"));
        assert!(!is_temporary_name("events.tmpx1"));
        let dir = tempdir();
        std::fs::write(dir.join("checkpoint.tmp99"), b"").unwrap();
        std::fs::write(dir.join("checkpoint"), b"").unwrap();
        assert_eq!(
            leftover_temporaries(&dir).unwrap(),
            vec![dir.join("checkpoint.tmp99")]
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempdir();
        let path = dir.join("kept");
        write_durably(&path, b"old").unwrap();
        // A directory where the target is: the rename fails, the temporary goes.
        let blocked = dir.join("blocked");
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("inside"), b"x").unwrap();
        assert!(write_durably(&blocked, b"new").is_err());
        assert!(leftover_temporaries(&dir).unwrap().is_empty());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        std::fs::remove_dir_all(&dir).ok();
    }

    fn tempdir() -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tessel-durable-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
