//! The dump directory: which files `optimize` writes with `dump_to`, in what order, and what
//! `dump_pass_re` keeps.

use std::path::{Path, PathBuf};
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::{parse_module, parse_module_file};
use tessel_tests::golden_dir;

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessel-dump-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

fn compile_with_dumps(dir: &Path, re: Option<&str>) {
    let mut m = parse_module_file(&golden_dir().join("passes/pipeline/mlp.hlo")).unwrap();
    let opts = CompileOptions {
        dump_to: Some(dir.to_path_buf()),
        dump_pass_re: re.map(str::to_string),
        ..Default::default()
    };
    optimize(&mut m, &opts).unwrap();
}

#[test]
fn dump_directory_listing() {
    let dir = fresh_dir("all");
    compile_with_dumps(&dir, None);
    let names = listing(&dir);
    // The passes that change the mlp module, numbered by their place in the pipeline.
    assert_eq!(
        names,
        [
            "module_0000.mlp.0002.after_call-inliner.hlo",
            "module_0000.mlp.0003.after_algebraic-simplifier.hlo",
            "module_0000.mlp.0004.after_dce.hlo",
            "module_0000.mlp.0020.after_fusion.hlo",
            "module_0000.mlp.0022.after_scheduling.hlo",
            "module_0000.mlp.after_optimizations.dot",
            "module_0000.mlp.after_optimizations.hlo",
            "module_0000.mlp.before_optimizations.hlo",
            "module_0000.mlp.buffer-assignment.txt",
        ]
    );
    // Every HLO dump parses back; the last pass dump is the optimized module.
    for n in names.iter().filter(|n| n.ends_with(".hlo")) {
        let text = std::fs::read_to_string(dir.join(n)).unwrap();
        parse_module(&text, Some(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    }
    let last_pass = std::fs::read_to_string(dir.join(&names[4])).unwrap();
    let after = std::fs::read_to_string(dir.join(&names[6])).unwrap();
    assert_eq!(last_pass, after);
    let dot = std::fs::read_to_string(dir.join(&names[5])).unwrap();
    assert!(dot.starts_with("digraph") && dot.contains("subgraph cluster_"));
    let ba = std::fs::read_to_string(dir.join(&names[8])).unwrap();
    assert!(ba.contains("buffers_peak_bytes:") && ba.contains("buffer 0: size="));

    // A second compile into the same directory takes the next module number.
    compile_with_dumps(&dir, None);
    assert!(listing(&dir)
        .iter()
        .any(|n| n == "module_0001.mlp.before_optimizations.hlo"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dump_pass_re_selects_passes() {
    let dir = fresh_dir("re");
    compile_with_dumps(&dir, Some("fusion|dce"));
    let passes: Vec<String> = listing(&dir)
        .into_iter()
        .filter(|n| n.contains(".after_") && !n.contains("after_optimizations"))
        .collect();
    assert_eq!(
        passes,
        [
            "module_0000.mlp.0004.after_dce.hlo",
            "module_0000.mlp.0020.after_fusion.hlo"
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_regex_is_an_error() {
    let dir = fresh_dir("bad");
    let mut m = parse_module_file(&golden_dir().join("passes/pipeline/mlp.hlo")).unwrap();
    let opts = CompileOptions {
        dump_to: Some(dir.clone()),
        dump_pass_re: Some("(".into()),
        ..Default::default()
    };
    let err = optimize(&mut m, &opts).unwrap_err();
    assert!(
        err.to_string()
            .contains("pass filter \"(\" is not a regular expression"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
