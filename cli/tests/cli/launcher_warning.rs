//! `tessel run` started by an MPI launcher among several processes but built without the
//! `mpi` feature: every process would run all the replicas alone, so it warns on stderr.
#![cfg(not(feature = "mpi"))]

use crate::common::corpus;
use std::process::Command;

#[test]
fn a_launcher_without_the_mpi_feature_is_warned_about() {
    let name = "dp_tanh_regression_r4";
    let outputs = std::env::temp_dir().join(format!(
        "tessel_launcher_warning_{}.safetensors",
        std::process::id()
    ));
    let run = |launcher: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tessel"));
        c.arg("run")
            .arg(corpus(&format!("{name}.hlo")))
            .arg("--inputs")
            .arg(corpus(&format!("{name}.inputs.safetensors")))
            .arg("--outputs")
            .arg(&outputs)
            .args(["--replicas", "4"])
            .env_remove("OMPI_COMM_WORLD_SIZE")
            .env_remove("PMI_SIZE");
        if let Some(size) = launcher {
            c.env("OMPI_COMM_WORLD_SIZE", size);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let warned = run(Some("2"));
    assert!(
        warned.contains("WARNING:tessel:")
            && warned.contains("OMPI_COMM_WORLD_SIZE=2")
            && warned.contains("without the `mpi` feature"),
        "{warned}"
    );
    assert!(!run(None).contains("mpi"), "no launcher, no warning");
    assert!(!run(Some("1")).contains("mpi"), "a job of one process");
    let _ = std::fs::remove_file(&outputs);
}
