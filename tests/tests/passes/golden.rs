//! Golden cases of the passes that have no other test (`tests/golden/passes/<dir>/`, run by
//! `tessel_tests::pass_golden::run_pass_suite`), one test per row of the table. Constant
//! folding, fusion, buffer assignment and the pipeline run their golden cases in their own
//! modules, beside their other tests; `every_golden_directory_is_run` checks that no directory
//! of cases is left without a test.

use tessel_compiler::passes::{
    AlgebraicSimplifier, AllReduceCombiner, CallInliner, Cse, Dce, Scheduler, WhileLoopSimplifier,
    WhileLoopUnroller,
};
use tessel_tests::golden_dir;
use tessel_tests::pass_golden::run_pass_suite;

/// Expands `test_name: "golden dir" => pass,` rows into one `#[test]` each (so that each suite
/// passes or fails on its own) and `TABLE_DIRS`, the directories they run.
macro_rules! pass_golden_tests {
    ($($test:ident: $dir:literal => $pass:expr,)*) => {
        $(
            #[test]
            fn $test() {
                run_pass_suite($dir, || Box::new($pass));
            }
        )*

        const TABLE_DIRS: &[&str] = &[$($dir),*];
    };
}

pass_golden_tests! {
    algebraic_simplifier: "algebraic-simplifier" => AlgebraicSimplifier,
    all_reduce_combiner: "all-reduce-combiner" => AllReduceCombiner::default(),
    call_inliner: "call-inliner" => CallInliner,
    cse: "cse" => Cse,
    dce: "dce" => Dce,
    scheduling: "scheduling" => Scheduler,
    while_loop_simplifier: "while-loop-simplifier" => WhileLoopSimplifier,
    while_loop_unroller: "while-loop-unroller" => WhileLoopUnroller,
}

/// Directories whose cases run in the pass's own module of this binary.
const OWN_MODULE_DIRS: &[&str] = &[
    "buffer-assignment",
    "constant-folding",
    "fusion",
    "pipeline",
];

#[test]
fn every_golden_directory_is_run() {
    let mut on_disk: Vec<String> = std::fs::read_dir(golden_dir().join("passes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut run: Vec<String> = TABLE_DIRS
        .iter()
        .chain(OWN_MODULE_DIRS)
        .map(|d| d.to_string())
        .collect();
    run.sort();
    assert_eq!(
        on_disk, run,
        "every directory of tests/golden/passes/ needs a row in the table or a suite of its own"
    );
}
