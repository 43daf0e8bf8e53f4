//! Every single-replica corpus module compiled by the JIT and run on JAX's inputs must give
//! JAX's outputs (floats within 1e-5 + 1e-4 |b|, 1e-3 relative after the CNN's convolutions;
//! integers exactly). The host CPU runs 64-bit types, so `x64_mean` (which device legality
//! rejects before any backend sees it) is computed and checked too. The data-parallel modules
//! need replicas and are run by the replica runtime, not here. Each module runs as parsed and
//! after the optimization pipeline (whose fusions become JIT kernels).

use std::path::Path;
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::{Array, Literal};
use tessel_runtime::host_io::read_safetensors;
use tessel_runtime::jit::{compile, Executable, JitOptions};

fn keyed(path: &Path) -> Vec<(String, Array)> {
    read_safetensors(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn by_index(mut v: Vec<(String, Array)>) -> Vec<Array> {
    v.retain(|(k, _)| k.parse::<usize>().is_ok());
    v.sort_by_key(|(k, _)| k.parse::<usize>().unwrap());
    v.into_iter().map(|(_, a)| a).collect()
}

fn compare(name: &str, got: &[&Array], want: &[Array], rel: f64) {
    assert_eq!(got.len(), want.len(), "{name}: output count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape.dims, w.shape.dims, "{name}: output {i} shape");
        assert_eq!(
            g.element_type(),
            w.element_type(),
            "{name}: output {i} type"
        );
        let mut worst = 0.0f64;
        for j in 0..w.len() {
            let (a, b) = (g.data.get_f64(j), w.data.get_f64(j));
            if w.element_type().is_float() {
                let tol = 1e-5 + rel * b.abs();
                let err = (a - b).abs();
                assert!(
                    err <= tol || (a.is_nan() && b.is_nan()),
                    "{name}: output {i}[{j}] = {a}, JAX {b}"
                );
                worst = worst.max(err / (1e-5 + b.abs()));
            } else {
                assert_eq!(
                    g.data.get_i64(j),
                    w.data.get_i64(j),
                    "{name}: output {i}[{j}]"
                );
            }
        }
        eprintln!("{name}: output {i} ok (worst relative error {worst:.2e})");
    }
}

#[test]
fn corpus_modules_match_jax() {
    let mut ran = 0;
    for file in tessel_tests::corpus_files() {
        let stem = file.file_stem().unwrap().to_string_lossy().to_string();
        if stem.starts_with("dp_") {
            continue;
        }
        let module = parse_module_file(&file).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let dir = file.parent().unwrap();
        let inputs: Vec<Literal> = by_index(keyed(&dir.join(format!("{stem}.inputs.safetensors"))))
            .into_iter()
            .map(Literal::Array)
            .collect();
        let outputs_path = dir.join(format!("{stem}.outputs.safetensors"));
        let want = if outputs_path.exists() {
            by_index(keyed(&outputs_path))
        } else {
            // grad_*: the module computes the value, key "0" of the gradient file.
            by_index(keyed(&dir.join(format!("{stem}.grad_outputs.safetensors"))))[..1].to_vec()
        };
        let rel = if stem.contains("cnn") { 1e-3 } else { 1e-4 };
        // As parsed (the JIT's own fusion), and after the optimizer (its fusion kernels).
        let mut optimized = module.clone();
        optimize(&mut optimized, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{stem}: optimize: {e}"));
        for (what, m) in [("unoptimized", &module), ("optimized", &optimized)] {
            let name = format!("{stem} ({what})");
            let exe = compile(m, &JitOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = exe.run(&inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
            compare(&name, &got.leaves(), &want, rel);
        }
        ran += 1;
    }
    assert!(ran >= 10, "only {ran} corpus modules ran");
}

/// Every file under `dir`, by path relative to it, with its bytes.
fn dump_files(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().to_path_buf();
                files.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// What `tessel compile --dump-to DIR` writes: the pass dumps, then the JIT's CLIF in
/// `DIR/jit`. Returns the executable, so a second compile cannot reuse its memory.
fn compile_with_dumps(file: &Path, dir: &Path) -> Executable {
    let _ = std::fs::remove_dir_all(dir);
    let mut module = parse_module_file(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let options = CompileOptions {
        dump_to: Some(dir.to_path_buf()),
        ..Default::default()
    };
    optimize(&mut module, &options).unwrap();
    let jit_options = JitOptions {
        dump_to: Some(dir.join("jit")),
        ..Default::default()
    };
    compile(&module, &jit_options).unwrap()
}

/// Two compiles of one module write byte-identical dumps: the CLIF refers to constants, plans
/// and routines by symbol, not by address, and nothing depends on hash-map order.
#[test]
fn dumps_are_identical_across_compiles() {
    let file = tessel_tests::corpus_dir()
        .expect("tests/corpus/conformance is missing")
        .join("mnist_cnn_train_step_b8.hlo");
    let base = std::env::temp_dir().join(format!("tessel_repro_dump_{}", std::process::id()));
    let (a, b) = (base.join("a"), base.join("b"));
    // Both executables stay alive: their constants and plans are at different addresses.
    let _first = compile_with_dumps(&file, &a);
    let _second = compile_with_dumps(&file, &b);
    let (fa, fb) = (dump_files(&a), dump_files(&b));
    assert!(
        fa.keys().any(|p| p.starts_with("jit")) && fa.keys().any(|p| !p.starts_with("jit")),
        "expected pass dumps and CLIF dumps: {:?}",
        fa.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        fa.keys().collect::<Vec<_>>(),
        fb.keys().collect::<Vec<_>>(),
        "the two compiles wrote different files"
    );
    for (path, bytes) in &fa {
        assert!(
            bytes == &fb[path],
            "{} differs between two compiles",
            path.display()
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}
