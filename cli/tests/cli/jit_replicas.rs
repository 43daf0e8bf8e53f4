//! `tessel run --backend jit --replicas N` on the command line: a shard_map module gives JAX's
//! numbers, bitwise the same on two runs; the wrong replica count and a failing replica are
//! explained, naming the replica; `--profile` covers a shard_map step run as a loop.

use crate::common::{corpus, succeeded};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tessel_compiler::ir::Array;
use tessel_runtime::host_io::{read_safetensors, write_safetensors};

fn temp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tessel_jit_replicas_{}_{tag}", std::process::id()))
}

fn tessel_run(hlo: &Path, inputs: &Path, outputs: &Path, replicas: usize) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(["run", hlo.to_str().unwrap(), "--inputs"])
        .arg(inputs)
        .arg("--outputs")
        .arg(outputs)
        .args(["--backend", "jit", "--replicas", &replicas.to_string()])
        .output()
        .unwrap()
}

#[test]
fn a_shard_map_module_gives_jax_numbers_on_four_jit_replicas() {
    let name = "dp_tanh_regression_r4";
    let hlo = corpus(&format!("{name}.hlo"));
    let inputs = corpus(&format!("{name}.inputs.safetensors"));
    let mut runs = Vec::new();
    for k in 0..2 {
        let out_path = temp(&format!("dp{k}.safetensors"));
        let out = tessel_run(&hlo, &inputs, &out_path, 4);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        runs.push(read_safetensors(&out_path).unwrap());
        std::fs::remove_file(&out_path).unwrap();
    }
    let want = read_safetensors(corpus(&format!("{name}.outputs.safetensors"))).unwrap();
    assert_eq!(runs[0].len(), want.len());
    for ((gk, g), (wk, w)) in runs[0].iter().zip(&want) {
        assert_eq!(gk, wk);
        assert_eq!(g.shape, w.shape, "{gk}");
        for i in 0..w.len() {
            let (a, b) = (g.data.get_f64(i), w.data.get_f64(i));
            assert!(
                (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
                "{gk}[{i}]: {a} vs {b}"
            );
        }
    }
    for ((k, a), (_, b)) in runs[0].iter().zip(&runs[1]) {
        assert_eq!(a.data.to_le_bytes(), b.data.to_le_bytes(), "{k}");
    }
    let wrong = tessel_run(&hlo, &inputs, &temp("dp_wrong.safetensors"), 2);
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("pass --replicas 4"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
}

#[test]
fn a_failing_replica_is_named() {
    // Replica 2 is in no group of the first all-reduce; the others wait for it at the second.
    let hlo = temp("bad.hlo");
    std::fs::write(
        &hlo,
        "HloModule bad\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
         ENTRY main {\n  x = f32[2] parameter(0)\n  pair = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add\n  \
         ROOT t = f32[2] all-reduce(pair), replica_groups={}, to_apply=add\n}\n",
    )
    .unwrap();
    let inputs = temp("bad_in.safetensors");
    write_safetensors(&inputs, &[("0".into(), Array::f32(&[2], vec![1.0, 2.0]))]).unwrap();
    let out = tessel_run(&hlo, &inputs, &temp("bad_out.safetensors"), 3);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("replica 2: ") && err.contains("in no replica group"),
        "{err}"
    );
    std::fs::remove_file(&hlo).unwrap();
    std::fs::remove_file(&inputs).unwrap();
}

/// A shard_map step run as a compiled loop on 4 JIT replicas: `--profile` prints the per-kernel
/// table per iteration, with the all-reduce once per replica per iteration (the warm-up run is
/// not counted).
#[test]
fn profile_covers_a_shard_map_loop() {
    let inputs = read_safetensors(corpus("dp_tanh_regression_r4.inputs.safetensors")).unwrap();
    // Parameter 1 (x) is fed, two iterations deep; parameter 0 (w) is carried.
    let stacked: Vec<(String, Array)> = inputs
        .into_iter()
        .map(|(k, a)| match k.as_str() {
            "1" => (k, tessel_runtime::feed::stack(&[a.clone(), a]).unwrap()),
            _ => (k, a),
        })
        .collect();
    let (in_path, out_path) = (temp("loop_in"), temp("loop_out"));
    write_safetensors(&in_path, &stacked).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(["run", corpus("dp_tanh_regression_r4.hlo").to_str().unwrap()])
        .arg("--inputs")
        .arg(&in_path)
        .arg("--outputs")
        .arg(&out_path)
        .args(["--backend", "jit", "--replicas", "4", "--loop", "2"])
        .args([
            "--infeed",
            "1",
            "--infeed-depth",
            "1",
            "--repeat",
            "2",
            "--profile",
        ])
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    assert!(stdout.contains("loop_ms_per_iteration: "), "{stdout}");
    let rows: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("ms/run"))
        .skip(1)
        .filter(|r| r.contains(" all-reduce "))
        .collect();
    assert!(!rows.is_empty(), "no all-reduce row:\n{stdout}");
    for r in rows {
        let calls: u64 = r.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert_eq!(calls, 4, "{r}");
    }
    std::fs::remove_file(&in_path).unwrap();
    std::fs::remove_file(&out_path).unwrap();
}

/// `--infeed-depth` sizes the infeed queues of a loop: zero, or the flag without `--loop`, is
/// refused with a message naming it.
#[test]
fn infeed_depth_is_checked() {
    let hlo = corpus("dp_tanh_regression_r4.hlo");
    let inputs = corpus("dp_tanh_regression_r4.inputs.safetensors");
    for extra in [
        &["--loop", "2", "--infeed", "1", "--infeed-depth", "0"][..],
        &["--infeed-depth", "3"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
            .args(["run", hlo.to_str().unwrap()])
            .arg("--inputs")
            .arg(&inputs)
            .args([
                "--outputs",
                "/dev/null",
                "--backend",
                "jit",
                "--replicas",
                "4",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--infeed-depth"), "{err}");
    }
}
