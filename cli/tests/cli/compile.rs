//! `tessel compile` on the command line: the optimizer's and the JIT's figures, the JIT's CLIF
//! dumps, and the rejection of what the device cannot run.

use crate::common::{corpus, succeeded};

use std::process::Command;

fn value<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in:\n{stdout}"))
}

#[test]
fn compile_prints_jit_figures_and_dumps_clif_per_kernel() {
    let dir = std::env::temp_dir().join(format!("tessel_compile_cli_{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args([
            "compile",
            corpus("mnist_cnn_train_step_b8.hlo").to_str().unwrap(),
            "--dump-to",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    let kernels: usize = value(&stdout, "jit_kernels").parse().unwrap();
    assert!(kernels > 10, "{stdout}");
    assert!(value(&stdout, "jit_arena_bytes").parse::<usize>().unwrap() > 0);
    value(&stdout, "jit_compile_ms").parse::<f64>().unwrap();
    // Each pass's time, summed over its runs: the fusion pass runs once, the simplifiers in
    // a fixed point, and none of them takes longer than the whole optimization.
    let compile_ms: f64 = value(&stdout, "compile_ms").parse().unwrap();
    for pass in ["fusion", "algebraic-simplifier", "scheduling"] {
        let ms: f64 = value(&stdout, &format!("pass_ms.{pass}")).parse().unwrap();
        assert!((0.0..=compile_ms).contains(&ms), "{pass}\n{stdout}");
    }
    // The b8 step's two conv layers: both pools folded, both gradients reading their
    // choices (with AVX-512), both activations left unstored.
    let choices = if tessel_runtime::jit::routines::pool_choices::choices_available() {
        "2"
    } else {
        "0"
    };
    for (key, want) in [
        ("jit_folded_pools", "2"),
        ("jit_pool_choices", choices),
        ("jit_discarded_outputs", choices),
    ] {
        assert_eq!(value(&stdout, key), want, "{key}\n{stdout}");
    }
    // One CLIF file before and one after Cranelift's optimizer per kernel, plus the program.
    let files: Vec<String> = std::fs::read_dir(dir.join("jit"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let before = files
        .iter()
        .filter(|f| f.ends_with(".before_opt.clif"))
        .count();
    let after = files
        .iter()
        .filter(|f| f.ends_with(".after_opt.clif"))
        .count();
    assert_eq!(before, kernels + 1, "{files:?}");
    assert_eq!(after, kernels + 1);
    // (The max-pools and their gradients run inside fusions.)
    let fusion = files
        .iter()
        .find(|f| f.contains("fusion") && f.ends_with(".after_opt.clif"))
        .expect("a fusion kernel");
    let clif = std::fs::read_to_string(dir.join("jit").join(fusion)).unwrap();
    assert!(clif.starts_with("function "), "{clif}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compile_compiles_the_per_replica_program_of_a_shard_map_module() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args([
            "compile",
            corpus("dp_tanh_regression_r4.hlo").to_str().unwrap(),
            "--replicas",
            "4",
        ])
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    assert!(value(&stdout, "jit_kernels").parse::<usize>().unwrap() > 0);
}

#[test]
fn compile_rejects_a_module_with_64_bit_values() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(["compile", corpus("x64_mean.hlo").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("E0201"), "{stderr}");
    assert!(
        stderr.contains("cannot be compiled for the device"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing is compiled");
}

/// The b128 MNIST step on two threads: its large elementwise kernels run in chunks claimed at
/// run time, and `tessel compile` says how many.
#[test]
fn compile_counts_the_kernels_run_in_chunks() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .env("TESSEL_THREADS", "2")
        .args([
            "compile",
            corpus("mnist_cnn_train_step_b128.hlo").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    let chunked: usize = value(&stdout, "jit_chunked_kernels").parse().unwrap();
    assert!(chunked > 0, "{stdout}");
}
