//! Faults a training job meets, each injected, and what the model_dir looks like after it:
//! - `loops`: failures inside a compiled loop (input, corrupt records, NaN, the stop flag);
//! - `model_dir`: damaged state files and checkpoints, orphaned checkpoints, leftovers of an
//!   interrupted save, a second trainer, step counts out of range;
//! - `crash`: the process killed at every write and rename of every save;
//! - `example`: the MNIST example stopped by SIGTERM and Ctrl-C, and refused for memory;
//! - `evaluator_process`: the MNIST example's TF_CONFIG evaluator process beside its chief.

#[path = "../support/mod.rs"]
mod support;

mod crash;
mod evaluator_process;
mod example;
mod loops;
mod model_dir;

use std::path::Path;
use std::sync::Mutex;
use support::tiny::files;

/// Tests that watch a whole model_dir's files or a process's signal dispositions run one at
/// a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Complete files only: checkpoints, the state file, event files, the trainer lock.
fn assert_clean(dir: &Path) {
    for f in files(dir) {
        assert!(
            f == "checkpoint"
                || f == "trainer.lock"
                || (f.starts_with("model.ckpt-") && f.ends_with(".safetensors"))
                || f.starts_with("events.out.tfevents."),
            "unexpected file {f} in {}",
            dir.display()
        );
    }
}

/// The MNIST example's binary, built beside this test by `cargo build --example mnist` (a
/// no-op when `cargo test` just built it; otherwise it keeps a stale binary from running).
fn mnist_example() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test's own path");
            // target/<profile>/deps/faults-HASH -> target/<profile>/examples/mnist
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("the test sits in target/<profile>/deps");
            let mut build = std::process::Command::new(env!("CARGO"));
            build
                .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
                .args(["build", "--quiet", "--workspace", "--example", "mnist"]);
            if !cfg!(debug_assertions) {
                build.arg("--release");
            }
            let status = build.status().expect("cargo runs");
            assert!(status.success(), "building the mnist example failed");
            profile_dir.join("examples").join("mnist")
        })
        .clone()
}

/// The MNIST example training `steps` steps in `dir` (batch 16 unless `extra` gives one,
/// loops of 5, seed 7), with `extra` flags.
fn mnist_train(dir: &Path, steps: u64, extra: &[&str]) -> std::process::Command {
    let mut c = mnist_unseeded(dir, steps, extra);
    c.args(["--random-seed", "7"]);
    c
}

/// The same without `--random-seed`: the run draws its seed.
fn mnist_unseeded(dir: &Path, steps: u64, extra: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(mnist_example());
    c.arg("--model-dir")
        .arg(dir)
        .args(["--mode", "train", "--iterations", "5"])
        .args(["--train-steps", &steps.to_string()]);
    if !extra.contains(&"--batch-size") {
        c.args(["--batch-size", "16"]);
    }
    c.args(extra)
        .env_remove(tessel_runtime::durable::FAULT_VARIABLE)
        .env_remove(tessel_runtime::durable::NO_SPACE_VARIABLE)
        .env_remove(tessel_runtime::memory::MEMORY_VARIABLE);
    c
}
