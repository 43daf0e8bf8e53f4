//! Bounded fuzzing in CI: a fixed-seed mutation test over the corpus (the JAX conformance
//! corpus and `tests/corpus/jax_user_programs/`) and the crash reproducers kept under
//! `tests/corpus/fuzz_regressions/`. Every mutant goes through `tessel_tests::fuzz`: parse,
//! print and re-parse, verify, legality and, when small, the interpreter on zero inputs; mutated
//! safetensors files go through `read_safetensors`. A stage may refuse a mutant with an error;
//! a panic is a failure, reported with the seed, the case and the mutant written to a file.
//!
//! `TESSEL_FUZZ_SEED` and `TESSEL_FUZZ_CASES` change the seed and the number of cases;
//! `TESSEL_FUZZ_CASE=n` runs only case `n` (to reproduce one). The unbounded fuzzer is the
//! cargo-fuzz crate in `tests/fuzz/` (its README says how to run it).

mod mutate;
mod regressions;

use mutate::{mutate_hlo, mutate_safetensors, Rng};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessel_tests::fuzz::{check_hlo_bytes, check_safetensors};

const DEFAULT_SEED: u64 = 0x7e55_e1f0;

/// Cases per run: about a minute of the HLO test in release on the 2-core CI machine; fewer
/// when the test profile is unoptimized.
const HLO_CASES: u64 = if cfg!(debug_assertions) {
    5_000
} else {
    50_000
};
const SAFETENSORS_CASES: u64 = if cfg!(debug_assertions) {
    3_000
} else {
    30_000
};

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

/// The cases to run: one when `TESSEL_FUZZ_CASE` is set, else `0..TESSEL_FUZZ_CASES`.
fn cases(default: u64) -> std::ops::Range<u64> {
    match env_u64("TESSEL_FUZZ_CASE") {
        Some(n) => n..n + 1,
        None => 0..env_u64("TESSEL_FUZZ_CASES").unwrap_or(default),
    }
}

fn seed() -> u64 {
    env_u64("TESSEL_FUZZ_SEED").unwrap_or(DEFAULT_SEED)
}

/// Where mutants and failures are written: `target/tmp/fuzz/`.
fn out_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The project's own JAX programs.
fn jax_user_programs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/jax_user_programs")
}

/// Every corpus file with extension `ext`: the conformance corpus and the project's programs.
fn corpus_with_extension(ext: &str) -> Vec<PathBuf> {
    let conformance = tessel_tests::corpus_files()[0]
        .parent()
        .unwrap()
        .to_path_buf();
    let mut files = Vec::new();
    for dir in [conformance, jax_user_programs()] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().ends_with(ext) {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() > 30, "too few {ext} files in the corpus");
    files
}

/// The message of a caught panic.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".to_string())
}

/// Runs `cases` mutants of corpus `files`, each checked by `check` under `catch_unwind`.
/// Before each case the mutant is written to `in_progress` so that an abort or a stack
/// overflow, which no unwinding catches, still leaves the input behind.
fn run_mutants<K: Ord + std::fmt::Debug>(
    what: &str,
    ext: &str,
    files: &[PathBuf],
    mutate: impl Fn(&mut Rng, &mut Vec<u8>, &[Vec<u8>]) -> String,
    check: impl Fn(&[u8], &Path) -> K,
    default_cases: u64,
) {
    let texts: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let dir = out_dir();
    let in_progress = dir.join(format!("{what}.in_progress.{ext}"));
    let scratch = dir.join(format!("{what}.scratch.{ext}"));
    let seed = seed();
    let start = Instant::now();
    let mut outcomes: BTreeMap<K, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let range = cases(default_cases);
    let count = range.end - range.start;
    println!(
        "{what}: seed {seed:#x}, {count} cases; if the process dies, the case is in {}",
        in_progress.display()
    );
    for case in range {
        let mut rng = Rng::new(seed ^ case.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let k = rng.below(files.len());
        let mut bytes = texts[k].clone();
        let how = mutate(&mut rng, &mut bytes, &texts);
        std::fs::write(&in_progress, &bytes).unwrap();
        match catch_unwind(AssertUnwindSafe(|| check(&bytes, &scratch))) {
            Ok(outcome) => *outcomes.entry(outcome).or_default() += 1,
            Err(payload) => {
                let file = dir.join(format!("{what}-{seed:x}-{case}.{ext}"));
                std::fs::write(&file, &bytes).unwrap();
                let name = files[k].file_name().unwrap().to_string_lossy();
                failures.push(format!(
                    "case {case} (TESSEL_FUZZ_SEED={seed:#x} TESSEL_FUZZ_CASE={case}): {name} \
                     with {how}\n  panicked: {}\n  mutant: {}",
                    panic_message(payload.as_ref()),
                    file.display()
                ));
            }
        }
    }
    let _ = std::fs::remove_file(&in_progress);
    println!(
        "{what}: {count} cases in {:.1}s, {} panics; outcomes {outcomes:?}",
        start.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {count} {what} mutants panicked:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn mutated_hlo_never_panics() {
    run_mutants(
        "hlo",
        "hlo",
        &corpus_with_extension(".hlo"),
        mutate_hlo,
        |bytes, scratch| check_hlo_bytes(bytes, Some(scratch)),
        HLO_CASES,
    );
}

#[test]
fn mutated_safetensors_never_panic() {
    // Files over 64 KiB only add time in reading data; the header checks are the same.
    let files: Vec<PathBuf> = corpus_with_extension(".safetensors")
        .into_iter()
        .filter(|p| std::fs::metadata(p).unwrap().len() <= 64 << 10)
        .collect();
    run_mutants(
        "safetensors",
        "safetensors",
        &files,
        |rng, bytes, _| mutate_safetensors(rng, bytes),
        check_safetensors,
        SAFETENSORS_CASES,
    );
}
