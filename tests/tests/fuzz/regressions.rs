//! Every crash reproducer the fuzzers found, kept under `tests/corpus/fuzz_regressions/`: each
//! `.hlo` and `.safetensors` file goes through the same checks as the mutants and must end in
//! `Ok` or a clean error. A file's first line (HLO) or its name says what it once broke.

use std::path::PathBuf;
use tessel_tests::fuzz::{check_hlo_bytes, check_safetensors};

fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/fuzz_regressions")
}

#[test]
fn every_fuzz_regression_ends_cleanly() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(regressions_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let scratch = super::out_dir().join("regression.scratch");
    let mut checked = 0;
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let outcome = std::panic::catch_unwind(|| {
            if name.ends_with(".hlo") {
                format!("{:?}", check_hlo_bytes(&bytes, Some(&scratch)))
            } else if name.ends_with(".safetensors") {
                format!("{:?}", check_safetensors(&bytes, &scratch))
            } else {
                "not an input".to_string()
            }
        });
        match outcome {
            Ok(o) => println!("{name}: {o}"),
            Err(_) => panic!("{name} panics again"),
        }
        checked += name.ends_with(".hlo") as usize + name.ends_with(".safetensors") as usize;
    }
    assert!(
        checked > 0,
        "no reproducers in {}",
        regressions_dir().display()
    );
}
