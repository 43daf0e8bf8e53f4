//! The escape hatch of docs/keras.md, run: a Keras 3 model with a custom layer, its JAX
//! training step exported as HLO text by `tests/keras/export_train_step.py`, trains with
//! `tessel run --loop` to the state and losses JAX computed for the same five steps.

use super::keras::{tessel, text};
use std::path::PathBuf;
use tessel_runtime::host_io::read_safetensors;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../estimator/tests/fixtures/keras_escape_hatch")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_keras_3_jax_training_step_trains_with_run_loop_as_in_jax() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    // The command the script wrote: 17 state parameters, then x and y fed 5 deep.
    let command = std::fs::read_to_string(fixture("command.txt")).unwrap();
    assert!(command.contains("--loop 5 --infeed 17,18"), "{command}");
    for backend in ["interp", "jit"] {
        let o = tessel(&[
            "run",
            &fixture("step.hlo"),
            "--inputs",
            &fixture("inputs.safetensors"),
            "--outputs",
            out.to_str().unwrap(),
            "--loop",
            "5",
            "--infeed",
            "17,18",
            "--backend",
            backend,
        ]);
        assert!(o.status.success(), "{backend}: {}", text(&o));
        let got = read_safetensors(&out).unwrap();
        let want = read_safetensors(fixture("jax_outputs.safetensors")).unwrap();
        assert_eq!(got.len(), want.len(), "{backend}: outputs");
        for (key, w) in &want {
            let (_, g) = got
                .iter()
                .find(|(k, _)| k == key)
                .unwrap_or_else(|| panic!("{backend}: no output {key}"));
            assert_eq!(g.shape, w.shape, "{backend}: output {key}");
            for i in 0..w.len() {
                let (a, b) = (g.data.get_f64(i), w.data.get_f64(i));
                assert!(
                    (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
                    "{backend}: output {key}[{i}]: tessel {a}, JAX {b}"
                );
            }
        }
        // Output 17, after the state, is the five steps' losses: training lowers them.
        let losses = &got.iter().find(|(k, _)| k == "17").unwrap().1;
        assert_eq!(losses.shape.dims.to_vec(), vec![5]);
        assert!(
            losses.data.get_f64(4) < 0.8 * losses.data.get_f64(0),
            "{backend}: losses {:?}",
            (0..5).map(|i| losses.data.get_f64(i)).collect::<Vec<_>>()
        );
    }
}
