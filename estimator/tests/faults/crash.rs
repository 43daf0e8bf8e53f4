//! The MNIST example killed (SIGKILL, through the fault-injection points of durable writes) at
//! every write and every rename of every save of a run, and finding the disk full at each
//! save's every file: the model_dir it leaves holds complete files, a rerun of the same
//! command resumes, and it ends with the same final checkpoint, bitwise, as a run that was
//! never stopped.

use super::{assert_clean, mnist_train};
use crate::support::tiny::{ckpt_bytes, temp_dir};
use std::os::unix::process::ExitStatusExt;
use tessel_estimator::checkpoint::Saver;
use tessel_runtime::durable::{FAULT_VARIABLE, NO_SPACE_VARIABLE};

/// Saves at steps 0, 10 and 20: a checkpoint file and the state file each.
const DURABLE_WRITES: u32 = 6;

const FLAGS: [&str; 2] = ["--save-checkpoints-steps", "10"];

/// The final checkpoint of a run to 20 that nothing stopped.
fn uninterrupted() -> Vec<u8> {
    let reference = temp_dir("crash_ref");
    let out = mnist_train(&reference, 20, &FLAGS).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ckpt_bytes(&reference, 20)
}

/// Reruns the same command in `dir` and checks it ends where an uninterrupted run ends.
fn rerun_reaches(dir: &std::path::Path, final_bytes: &[u8], case: &str) {
    let resumed = mnist_train(dir, 20, &FLAGS).output().unwrap();
    assert!(
        resumed.status.success(),
        "{case}: the rerun failed: {}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert!(
        ckpt_bytes(dir, 20) == final_bytes,
        "{case}: the resumed run's checkpoint differs from the uninterrupted one"
    );
    assert_clean(dir);
}

#[test]
fn killed_at_every_write_and_rename_of_a_save_then_resumed() {
    let final_bytes = uninterrupted();
    for point in ["written", "renamed"] {
        for n in 1..=DURABLE_WRITES {
            let case = format!("{point}:{n}");
            let dir = temp_dir(&format!("crash_{point}_{n}"));
            let killed = mnist_train(&dir, 20, &FLAGS)
                .env(FAULT_VARIABLE, &case)
                .output()
                .unwrap();
            assert_eq!(
                killed.status.signal(),
                Some(libc::SIGKILL),
                "{case}: not killed: {}",
                String::from_utf8_lossy(&killed.stderr)
            );
            // What the kill left names only complete checkpoints.
            let saver = Saver::new(&*dir, 5);
            if let Some(restored) = saver
                .restore(false)
                .unwrap_or_else(|e| panic!("{case}: {e}"))
            {
                assert!(restored.checkpoint.global_step <= 20, "{case}");
            }
            rerun_reaches(&dir, &final_bytes, &case);
        }
    }
}

/// A full disk at any file of any save: the run fails naming the file, the temporary is
/// gone, the state file still names complete checkpoints, and the rerun (space freed)
/// resumes to the uninterrupted result.
#[test]
fn a_full_disk_at_every_file_of_a_save_then_resumed() {
    let final_bytes = uninterrupted();
    for n in 1..=DURABLE_WRITES {
        let case = format!("disk full at write {n}");
        let dir = temp_dir(&format!("nospace_{n}"));
        let out = mnist_train(&dir, 20, &FLAGS)
            .env(NO_SPACE_VARIABLE, n.to_string())
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{case}: {log}");
        assert!(log.contains("No space left on device"), "{case}: {log}");
        assert!(!log.contains("panicked"), "{case}: {log}");
        assert_clean(&dir);
        let saver = Saver::new(&*dir, 5);
        saver
            .restore(false)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        rerun_reaches(&dir, &final_bytes, &case);
    }
}
