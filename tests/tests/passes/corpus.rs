//! Every corpus module computes the same outputs (interpreter) before and after the full
//! pipeline, within the corpus README's tolerance; shard_map modules run on their replicas.

use std::path::Path;
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, Literal, Module};
use tessel_runtime::session::{compile, Device, Outputs, SessionError};
use tessel_runtime::shard_map::{is_shard_map_module, Mesh};
use tessel_tests::corpus_files;
use tessel_tests::numerics::{compare_literals, Tolerance, CORPUS_TOLERANCE};

/// The arguments of corpus module `hlo` (a file of `tessel_tests::corpus_files`).
fn inputs(hlo: &Path) -> Vec<Array> {
    let name = hlo.file_stem().unwrap().to_string_lossy();
    tessel_tests::corpus_arrays(&format!("{name}.inputs.safetensors"))
}

/// A shard_map module on `replicas` interpreter replicas, through the session API: the
/// entry root's leaves, global.
fn run_sharded(m: &Module, args: &[Array], replicas: usize) -> Result<Vec<Array>, SessionError> {
    let program = compile(m, &Device::interpreter().with_replicas(replicas))?;
    match program.run(&program.bind_ordered(args.to_vec())?)? {
        Outputs::Global(leaves) => Ok(leaves),
        Outputs::PerReplica(_) => unreachable!("a shard_map program gives global arrays"),
    }
}

fn run(m: &Module, args: &[Array]) -> Result<Literal, String> {
    if is_shard_map_module(m) {
        let replicas = Mesh::of_module(m).map_err(|e| e.message)?.device_count();
        let leaves = run_sharded(m, args, replicas).map_err(|e| e.to_string())?;
        Ok(Literal::Tuple(
            leaves.into_iter().map(Literal::Array).collect(),
        ))
    } else {
        let args: Vec<Literal> = args.iter().cloned().map(Literal::Array).collect();
        let out = evaluate(m, &args).map_err(|e| e.to_string())?;
        // Flatten so that both sides compare leaf by leaf.
        Ok(Literal::Tuple(
            out.leaves()
                .into_iter()
                .cloned()
                .map(Literal::Array)
                .collect(),
        ))
    }
}

/// Checks one corpus module; returns a failure message.
fn check(file: &Path) -> Result<(), String> {
    let name = file.file_stem().unwrap().to_string_lossy().to_string();
    let m = parse_module_file(file).map_err(|e| e.to_string())?;
    let args = inputs(file);
    let before = run(&m, &args).map_err(|e| format!("{name} does not run: {e}"))?;
    let mut optimized = m.clone();
    optimize(&mut optimized, &CompileOptions::default()).map_err(|e| format!("{name}: {e}"))?;
    // Convolutions sum long rows: allow the README's 1e-3 relative on the CNN steps.
    let tol = if name.contains("cnn") {
        Tolerance {
            atol: 1e-5,
            rtol: 1e-3,
        }
    } else {
        CORPUS_TOLERANCE
    };
    let after =
        run(&optimized, &args).map_err(|e| format!("{name}: optimized module fails: {e}"))?;
    compare_literals(&after, &before, tol).map_err(|e| format!("{name}: {e}"))
}

/// The big batch runs in its own test so that it runs beside the others.
const BIG: &str = "mnist_cnn_train_step_b128";

#[test]
fn optimized_corpus_modules_compute_the_same_values() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in corpus_files() {
        if file.file_stem().unwrap().to_string_lossy() == BIG {
            continue;
        }
        if let Err(e) = check(&file) {
            failures.push(e);
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} corpus modules checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn optimized_mnist_b128_step_computes_the_same_values() {
    let file = tessel_tests::corpus_dir()
        .unwrap()
        .join(format!("{BIG}.hlo"));
    check(&file).unwrap();
}
