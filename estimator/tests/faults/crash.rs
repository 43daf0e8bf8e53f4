//! The MNIST example killed (SIGKILL, through the fault-injection point of durable writes) at
//! every write and every rename of every save of a run: the model_dir it leaves holds
//! complete files, a rerun of the same command resumes, and it ends with the same final
//! checkpoint, bitwise, as a run that was never killed.

use super::{assert_clean, mnist_train};
use crate::support::tiny::{ckpt_bytes, temp_dir};
use std::os::unix::process::ExitStatusExt;
use tessel_estimator::checkpoint::Saver;
use tessel_runtime::durable::FAULT_VARIABLE;

/// Saves at steps 0, 10 and 20: a checkpoint file and the state file each.
const DURABLE_WRITES: u32 = 6;

#[test]
fn killed_at_every_write_and_rename_of_a_save_then_resumed() {
    let flags = ["--save-checkpoints-steps", "10"];
    let reference = temp_dir("crash_ref");
    let out = mnist_train(&reference, 20, &flags).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let final_bytes = ckpt_bytes(&reference, 20);

    for point in ["written", "renamed"] {
        for n in 1..=DURABLE_WRITES {
            let case = format!("{point}:{n}");
            let dir = temp_dir(&format!("crash_{point}_{n}"));
            let killed = mnist_train(&dir, 20, &flags)
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
            let resumed = mnist_train(&dir, 20, &flags).output().unwrap();
            assert!(
                resumed.status.success(),
                "{case}: the rerun failed: {}",
                String::from_utf8_lossy(&resumed.stderr)
            );
            assert!(
                ckpt_bytes(&dir, 20) == final_bytes,
                "{case}: the resumed run's checkpoint differs from the uninterrupted one"
            );
            assert_clean(&dir);
        }
    }
}
