//! HLO dumps are reproducible: compiling one module twice, each time into a fresh dump
//! directory, writes the same files with byte-identical contents (every pass dump, the buffer
//! assignment and the drawing), for the golden mlp and every corpus module.

use std::path::{Path, PathBuf};
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module_file;
use tessel_tests::{corpus_files, golden_dir};

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessel-repro-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Every file of `dir` as (name, contents), sorted by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// Compiles `file` with dumps into a fresh directory and returns what was written.
fn dump_once(file: &Path, run: &str) -> Vec<(String, Vec<u8>)> {
    let stem = file.file_stem().unwrap().to_string_lossy();
    let dir = fresh_dir(&format!("{stem}-{run}"));
    let mut m = parse_module_file(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let opts = CompileOptions {
        dump_to: Some(dir.clone()),
        dump_pass_re: None,
        ..Default::default()
    };
    optimize(&mut m, &opts).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let out = files(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn two_compiles_write_byte_identical_dumps() {
    let mut modules = vec![golden_dir().join("passes/pipeline/mlp.hlo")];
    modules.extend(corpus_files());
    for file in &modules {
        let first = dump_once(file, "a");
        let second = dump_once(file, "b");
        assert!(
            first.iter().any(|(n, _)| n.contains(".after_")),
            "{}: no pass dumps were written",
            file.display()
        );
        let names = |d: &[(String, Vec<u8>)]| d.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&first), names(&second), "{}", file.display());
        for ((name, a), (_, b)) in first.iter().zip(&second) {
            assert!(
                a == b,
                "{}: {name} differs between two compiles",
                file.display()
            );
        }
    }
}
