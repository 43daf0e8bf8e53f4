//! The tree's structure: the command line imports only the session API and the IR from the
//! layers below it, and no source file is over 900 lines.

mod rules;

use rules::{forbidden_paths, too_long, MAX_LINES};
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, skipping build output and version control.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn cli_imports_only_the_session_api() {
    let root = workspace_root();
    let files = rust_files(&root.join("cli/src"));
    assert!(files.len() > 5, "cli/src has too few files: {files:?}");
    let mut violations = Vec::new();
    for file in &files {
        for (line, path) in forbidden_paths(&read(file)) {
            let shown = file.strip_prefix(&root).unwrap().display();
            violations.push(format!("{shown}:{line}: {path}"));
        }
    }
    assert!(
        violations.is_empty(),
        "the CLI reaches past the session API:\n{}",
        violations.join("\n")
    );
}

#[test]
fn no_source_file_is_over_the_limit() {
    let root = workspace_root();
    let files = rust_files(&root);
    assert!(files.len() > 100, "found only {} source files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            too_long(&read(f))
                .map(|n| format!("{}: {n} lines", f.strip_prefix(&root).unwrap().display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn planted_imports_are_found() {
    let src = "use tessel_runtime::session::{Device, Program};\n\
               use tessel_runtime::jit::ConvAlgorithm;\n\
               use tessel_compiler::{ir::Module, training_loop::LoopError};\n\
               use tessel_runtime::{\n    session::Device,\n    threads::ThreadBudget,\n};\n\
               fn f() { let _ = tessel_compiler::passes::default_pipeline(); }\n\
               fn g<'a>() -> char { let _ = \"a \\\" b\"; '\"' }\n\
               use tessel_runtime::replicas::Hub;\n";
    assert_eq!(
        forbidden_paths(src),
        vec![
            (2, "tessel_runtime::jit".to_string()),
            (3, "tessel_compiler::training_loop".to_string()),
            (4, "tessel_runtime::threads".to_string()),
            (8, "tessel_compiler::passes".to_string()),
            (10, "tessel_runtime::replicas".to_string()),
        ]
    );
}

#[test]
fn allowed_paths_and_comments_are_not_violations() {
    let src = "use tessel_runtime::session::{profile, ConvAlgorithm, ThreadBudget};\n\
               use tessel_compiler::{compile_options_doc, ir::Module};\n\
               use my_tessel_runtime::jit::X;\n\
               // use tessel_runtime::jit::ConvAlgorithm;\n\
               /* tessel_compiler::passes::x */\n\
               const S: &str = \"tessel_runtime::replicas::Hub\";\n\
               const Q: char = '\"';\n\
               fn f<'a>(x: &'a str) -> &'a str { x }\n";
    assert_eq!(forbidden_paths(src), vec![]);
}

#[test]
fn a_planted_long_file_is_found() {
    assert_eq!(too_long(&"x\n".repeat(MAX_LINES)), None);
    assert_eq!(too_long(&"x\n".repeat(MAX_LINES + 1)), Some(MAX_LINES + 1));
}
