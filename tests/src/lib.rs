//! Shared helpers for tessel's integration and golden tests.

pub mod fuzz;
pub mod golden;
pub mod modgen;
pub mod numerics;
pub mod pass_golden;

use std::path::PathBuf;
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::{Array, Literal, Module};
use tessel_runtime::host_io::read_safetensors;

/// The conformance corpus: the modules JAX wrote from real programs, with their inputs and
/// JAX's outputs (`tests/corpus/conformance/`, copied from the project's shared `hlo/` folder
/// with its README, so a clone of the repository alone passes its tests).
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/conformance");
    dir.is_dir().then(|| dir.canonicalize().unwrap())
}

/// Every `.hlo` file of the corpus, sorted by name. Panics when the corpus is missing, so that
/// a test meant to cover it cannot pass vacuously.
pub fn corpus_files() -> Vec<PathBuf> {
    let dir = corpus_dir().expect("tests/corpus/conformance is missing");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .hlo files in the corpus");
    files
}

/// Corpus module `name` (`tests/corpus/conformance/<name>.hlo`) as parsed. Panics naming it
/// when it is missing or does not parse.
pub fn corpus_module(name: &str) -> Module {
    let dir = corpus_dir().expect("tests/corpus/conformance is missing");
    parse_module_file(&dir.join(format!("{name}.hlo"))).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The arrays of corpus file `file` (e.g. `mnist_cnn_train_step_b128.inputs.safetensors`) in
/// the order of their numeric keys: a module's arguments or JAX's outputs. Panics naming the
/// file when it is missing or unreadable.
pub fn corpus_arrays(file: &str) -> Vec<Array> {
    let dir = corpus_dir().expect("tests/corpus/conformance is missing");
    let mut v = read_safetensors(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    v.sort_by_key(|(k, _)| k.parse::<usize>().expect("numeric keys"));
    v.into_iter().map(|(_, a)| a).collect()
}

/// [`corpus_arrays`] as a module's arguments.
pub fn corpus_args(file: &str) -> Vec<Literal> {
    corpus_arrays(file)
        .into_iter()
        .map(Literal::Array)
        .collect()
}

/// The directory of golden cases, `tests/golden/`.
pub fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}
pub mod broken_model;
pub mod models;
