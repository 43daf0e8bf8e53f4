//! `tessel run --backend jit` on the command line: JAX's numbers out, timings with --repeat.

use crate::common::{corpus, succeeded};

use std::process::Command;
use tessel_runtime::host_io::read_safetensors;

#[test]
fn jit_backend_writes_jax_outputs_and_timings() {
    let out_path =
        std::env::temp_dir().join(format!("tessel_jit_cli_{}.safetensors", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args([
            "run",
            corpus("softmax_rows.hlo").to_str().unwrap(),
            "--inputs",
            corpus("softmax_rows.inputs.safetensors").to_str().unwrap(),
            "--outputs",
            out_path.to_str().unwrap(),
            "--backend",
            "jit",
            "--repeat",
            "3",
        ])
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    assert!(
        stdout.contains("run_ms_median: ") && stdout.contains("compile_ms: "),
        "{stdout}"
    );
    let got = read_safetensors(&out_path).unwrap();
    let want = read_safetensors(corpus("softmax_rows.outputs.safetensors")).unwrap();
    assert_eq!(got.len(), want.len());
    for ((gk, g), (wk, w)) in got.iter().zip(&want) {
        assert_eq!(gk, wk);
        for i in 0..w.len() {
            let (a, b) = (g.data.get_f64(i), w.data.get_f64(i));
            assert!(
                (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
                "{gk}[{i}]: {a} vs {b}"
            );
        }
    }
    std::fs::remove_file(&out_path).unwrap();
}

/// `--profile` prints one row per kernel and GEMM call of the step, with the per-run time, and
/// the rows add up to the total; the warm-up run is not counted (3 calls per run, not 4).
/// The rows of `tessel run --backend jit --profile` on the b8 MNIST train step, with `extra`
/// arguments: every line after the table's header.
fn train_step_profile(name: &str, extra: &[&str]) -> Vec<String> {
    let out_path = std::env::temp_dir().join(format!(
        "tessel_jit_{name}_{}.safetensors",
        std::process::id()
    ));
    let hlo = corpus("mnist_cnn_train_step_b8.hlo");
    let inputs = corpus("mnist_cnn_train_step_b8.inputs.safetensors");
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(["run", hlo.to_str().unwrap(), "--inputs"])
        .arg(&inputs)
        .arg("--outputs")
        .arg(&out_path)
        .args(["--backend", "jit", "--profile"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(&out_path).unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip_while(|l| !l.contains("ms/run"))
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn profile_lists_the_convolutions_and_kernels_of_a_train_step() {
    let rows = train_step_profile("prof", &["--repeat", "3"]);
    assert!(rows.iter().any(|r| r.contains(" convolution ")), "{rows:?}");
    // (The max-pools and their gradients run inside fusions.)
    assert!(rows.iter().any(|r| r.contains(" fusion ")), "{rows:?}");
    // Each convolution runs once per step: the warm-up run was reset away.
    for r in rows.iter().filter(|r| r.contains(" convolution ")) {
        let calls: u64 = r.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert_eq!(calls, 1, "{r}");
    }
    let ms = |r: &str| -> f64 { r.split_whitespace().next().unwrap().parse().unwrap() };
    let total = ms(rows.last().unwrap());
    let sum: f64 = rows[..rows.len() - 1].iter().map(|r| ms(r)).sum();
    assert!(
        (sum - total).abs() <= 0.01 * total + 0.01,
        "rows add to {sum}, total {total}"
    );
}

/// `--profile-rows N` keeps N rows before the summed rest; `--profile-rows 0` lists every
/// kernel, with no summed line.
#[test]
fn profile_rows_sets_the_table_length() {
    let three = train_step_profile("prof_rows", &["--profile-rows", "3"]);
    // 3 rows, the summed rest, the total.
    assert_eq!(three.len(), 5, "{three:?}");
    assert!(three[3].contains("more kernels and routines"), "{three:?}");
    let all = train_step_profile("prof_rows", &["--profile-rows", "0"]);
    assert!(all.iter().all(|r| !r.contains("more kernels")), "{all:?}");
    let rest: usize = three[3].split_whitespace().nth(2).unwrap().parse().unwrap();
    // Every kernel called: the 3 shown, the rest, and the total line.
    assert_eq!(all.len(), 3 + rest + 1, "{all:?}");
}

#[test]
fn profile_needs_the_jit() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args([
            "run",
            corpus("softmax_rows.hlo").to_str().unwrap(),
            "--inputs",
            corpus("softmax_rows.inputs.safetensors").to_str().unwrap(),
            "--outputs",
            "/dev/null",
            "--profile",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--backend jit"));
}

/// The JIT stands for the device: a module with 64-bit values is rejected with the legality
/// diagnostics, and nothing is written.
#[test]
fn jit_rejects_a_module_the_device_cannot_run() {
    let out_path =
        std::env::temp_dir().join(format!("tessel_jit_x64_{}.safetensors", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args([
            "run",
            corpus("x64_mean.hlo").to_str().unwrap(),
            "--inputs",
            corpus("x64_mean.inputs.safetensors").to_str().unwrap(),
            "--outputs",
            out_path.to_str().unwrap(),
            "--backend",
            "jit",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("E0201"), "{stderr}");
    assert!(stderr.contains("--backend interp"), "{stderr}");
    assert!(!out_path.exists());
}
