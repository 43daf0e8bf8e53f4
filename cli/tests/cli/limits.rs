//! Resource limits on the command line: values larger than the machine's memory, replica
//! counts beyond what it can run, and where `check` prints. Each must end in a clear error
//! (exit 1), never an abort, a panic or a backtrace.

use std::path::PathBuf;
use std::process::{Command, Output};
use tempfile::TempDir;

/// Writes `bytes` to file `name` in the test's directory (removed with it).
fn temp(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A safetensors file with no tensors.
fn no_inputs(dir: &TempDir) -> PathBuf {
    let header = b"{}";
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    temp(dir, "empty.safetensors", &bytes)
}

fn tessel(args: &[&str], memory: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessel"));
    c.args(args);
    if let Some(m) = memory {
        c.env("TESSEL_MEMORY_BYTES", m);
    }
    c.output().unwrap()
}

/// Exit 1 with `want` on stderr, and no sign of an abort or a panic.
fn fails_with(out: &Output, want: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(want), "want {want:?} in:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("memory allocation"), "{stderr}");
    stderr
}

const HUGE_BROADCAST: &str = "HloModule m\n\nENTRY e {\n  c = f32[] constant(1)\n  \
     ROOT b = f32[1000000,1000000] broadcast(c), dimensions={}\n}\n";

const HUGE_PAD: &str = "HloModule m\n\nENTRY e {\n  x = f32[4] constant({1, 2, 3, 4})\n  \
     z = f32[] constant(0)\n  \
     ROOT p = f32[3000000000004] pad(x, z), padding=0_0_1000000000000\n}\n";

const SMALL: &str = "HloModule m\n\nENTRY e {\n  c = f32[] constant(1)\n  \
     ROOT b = f32[1000,1000] broadcast(c), dimensions={}\n}\n";

#[test]
fn a_value_larger_than_memory_is_an_error_on_every_verb() {
    let dir = tempfile::tempdir().unwrap();
    let file = temp(&dir, "huge.hlo", HUGE_BROADCAST.as_bytes());
    let file = file.to_str().unwrap();
    let inputs = no_inputs(&dir);
    let inputs = inputs.to_str().unwrap();
    let outputs = temp(&dir, "out.safetensors", b"");
    let outputs = outputs.to_str().unwrap();
    let want = "b in e needs 4000000000000 bytes (3.6 TiB) for its value f32[1000000,1000000]";
    for backend in ["interp", "jit"] {
        let out = tessel(
            &[
                "run",
                file,
                "--inputs",
                inputs,
                "--outputs",
                outputs,
                "--backend",
                backend,
            ],
            None,
        );
        let stderr = fails_with(&out, want);
        assert!(stderr.contains("of memory are available"), "{stderr}");
    }
    fails_with(&tessel(&["compile", file], None), want);
    let pad = temp(&dir, "pad.hlo", HUGE_PAD.as_bytes());
    let out = tessel(
        &[
            "run",
            pad.to_str().unwrap(),
            "--inputs",
            inputs,
            "--outputs",
            outputs,
        ],
        None,
    );
    fails_with(&out, "p in e needs 12000000000016 bytes");
}

#[test]
fn replicas_are_bounded_by_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let file = temp(&dir, "small.hlo", SMALL.as_bytes());
    let file = file.to_str().unwrap();
    let inputs = no_inputs(&dir);
    let inputs = inputs.to_str().unwrap();
    let outputs = temp(&dir, "out2.safetensors", b"");
    let outputs = outputs.to_str().unwrap();
    let run = |backend: &str, replicas: &str, memory: Option<&str>| {
        tessel(
            &[
                "run",
                file,
                "--inputs",
                inputs,
                "--outputs",
                outputs,
                "--backend",
                backend,
                "--replicas",
                replicas,
            ],
            memory,
        )
    };
    fails_with(
        &run("interp", "40000", None),
        "--replicas: 40000 replicas is more than the 1024 a run may have",
    );
    // 4 MB per replica: 2 fit in 10 MB, 3 do not.
    for backend in ["interp", "jit"] {
        let ok = run(backend, "2", Some("10000000"));
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        fails_with(
            &run(backend, "3", Some("10000000")),
            "--replicas 3: 3 replicas need",
        );
    }
    fails_with(
        &tessel(&["compile", file, "--replicas", "0"], None),
        "--replicas must be at least 1",
    );
    fails_with(
        &tessel(&["compile", file, "--replicas", "40000"], None),
        "40000 replicas is more than the 1024",
    );
}

#[test]
fn check_prints_diagnostics_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let ok = temp(&dir, "ok.hlo", SMALL.as_bytes());
    let f64 = temp(
        &dir,
        "f64.hlo",
        b"HloModule m\n\nENTRY e {\n  x = f64[2] parameter(0)\n  ROOT y = f64[2] tanh(x)\n}\n",
    );
    let out = tessel(
        &["check", ok.to_str().unwrap(), f64.to_str().unwrap()],
        None,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = fails_with(&out, "error");
    assert!(stdout.contains("ok.hlo: ok"), "{stdout}");
    assert!(!stdout.contains("error"), "{stdout}");
    assert!(
        stderr.contains("1 of 2 files cannot run on the device"),
        "{stderr}"
    );
}
