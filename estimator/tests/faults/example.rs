//! The MNIST example as a scheduler and a user stop it: SIGTERM at a random step saves and
//! exits 143, and the rerun ends bitwise where an uninterrupted run ends; Ctrl-C during
//! evaluation stops it (130); a step count that would wrap, and a batch whose compiled loop
//! does not fit in memory, are refused before anything runs out.

use super::{mnist_train, mnist_unseeded};
use crate::support::tiny::{checkpoint_steps, ckpt_bytes, temp_dir};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

/// The child's stderr, read on a thread as it comes (a closed pipe would fail its logging).
struct Log {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Log {
    fn of(child: &mut Child) -> Log {
        let stderr = child.stderr.take().expect("stderr piped");
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Log {
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `marker` (or the end of the log).
    fn wait_for(&mut self, marker: &str) {
        while let Ok(line) = self.lines.recv() {
            let found = line.contains(marker);
            self.seen.push(line);
            if found {
                return;
            }
        }
    }

    /// Everything the child wrote, once it has exited.
    fn all(mut self) -> String {
        self.seen.extend(self.lines.iter());
        self.seen.join("\n")
    }
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: kill(2) on a child process this test started and has not yet waited for.
    let rc = unsafe { libc::kill(child.id() as i32, signal) };
    assert_eq!(rc, 0, "kill failed");
}

/// A delay in 0..max ms that differs from run to run (so the signal lands at varied steps).
fn random_delay(max_ms: u64) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    Duration::from_millis(nanos % max_ms)
}

#[test]
fn sigterm_saves_exits_143_and_the_rerun_resumes_bitwise() {
    let steps = 400;
    let flags = ["--save-checkpoints-steps", "100000"];
    let reference = temp_dir("sigterm_ref");
    let out = mnist_train(&reference, steps, &flags).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = temp_dir("sigterm");
    let mut child = mnist_train(&dir, steps, &flags)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = Log::of(&mut child);
    // The first loop's log line: training runs.
    log.wait_for("loss = ");
    let delay = random_delay(200);
    std::thread::sleep(delay);
    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let log = log.all();
    assert_eq!(status.code(), Some(143), "after {delay:?}: {log}");
    let saved = *checkpoint_steps(&dir).last().unwrap();
    assert!(saved > 0 && saved < steps as i64, "saved {saved}: {log}");
    assert!(
        log.contains(&format!(
            "stopped by SIGTERM (preemption) at step {saved}: its checkpoint is saved"
        )),
        "{log}"
    );

    let resumed = mnist_train(&dir, steps, &flags).output().unwrap();
    let resumed_log = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{resumed_log}");
    assert!(
        resumed_log.contains(&format!("model.ckpt-{saved}.safetensors")),
        "{resumed_log}"
    );
    assert!(
        ckpt_bytes(&dir, steps as i64) == ckpt_bytes(&reference, steps as i64),
        "stopped at {saved} after {delay:?}: the resumed run differs from the uninterrupted one"
    );
}

#[test]
fn ctrl_c_stops_evaluation_with_130() {
    let dir = temp_dir("sigint_eval");
    let out = mnist_train(&dir, 5, &[]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child = std::process::Command::new(super::mnist_example())
        .arg("--model-dir")
        .arg(&*dir)
        .args([
            "--mode",
            "evaluate",
            "--batch-size",
            "16",
            "--iterations",
            "1",
        ])
        .args(["--eval-steps", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = Log::of(&mut child);
    log.wait_for("Starting evaluation");
    signal(&child, libc::SIGINT);
    let status = child.wait().unwrap();
    let log = log.all();
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(log.contains("error: evaluation interrupted"), "{log}");
}

#[test]
fn a_wrapping_step_count_is_refused() {
    let dir = temp_dir("wrap_steps");
    let out = mnist_train(&dir, u64::MAX, &[]).output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.contains("max_steps=18446744073709551615 would train past step 2147483647"),
        "{log}"
    );
}

/// Batch 30,000 passed the memory check of single programs (its largest value, 3.0 GB, fits
/// in 4 GB) and was OOM-killed in its loop.
/// The loop's arena and infeed queue are now counted before anything is allocated.
#[test]
fn a_loop_that_does_not_fit_in_memory_is_refused() {
    let dir = temp_dir("loop_memory");
    let out = mnist_train(&dir, 10, &["--batch-size", "30000"])
        .env(tessel_runtime::memory::MEMORY_VARIABLE, "4000000000")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.contains("the buffer arenas and 4 infeed batches of 94200000 bytes"),
        "{log}"
    );
    assert!(
        log.contains("4000000000 bytes (3.7 GiB) of memory are available"),
        "{log}"
    );
}

/// Without `--random-seed`, two resumes of one checkpoint used to draw different dropout
/// masks (a seed per process). The seed drawn by the first run is kept in the model_dir, so
/// two copies of a model_dir resumed to the same step give the same bytes.
#[test]
fn resumes_without_a_seed_are_exact() {
    let flags = ["--save-checkpoints-steps", "10"];
    let first = temp_dir("noseed");
    let out = mnist_unseeded(&first, 10, &flags).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seed = std::fs::read_to_string(first.join("random_seed")).unwrap();
    assert!(seed.trim().parse::<i64>().is_ok(), "{seed:?}");
    let copies = [temp_dir("noseed_a"), temp_dir("noseed_b")];
    for copy in &copies {
        for entry in std::fs::read_dir(&*first).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
            }
        }
        let out = mnist_unseeded(copy, 20, &flags).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        ckpt_bytes(&copies[0], 20) == ckpt_bytes(&copies[1], 20),
        "two resumes of one unseeded model_dir differ"
    );
    // The seed is the run's: a run in another model_dir draws its own.
    let other = temp_dir("noseed_other");
    let out = mnist_unseeded(&other, 10, &flags).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(
        std::fs::read_to_string(other.join("random_seed")).unwrap(),
        seed
    );
}
