//! The pipeline: golden cases of the whole default pipeline (`tests/golden/passes/pipeline/`),
//! the verifier naming the pass that broke a module, fixed points, and honest change reports
//! of every pass on every corpus module.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::Module;
use tessel_compiler::passes::pipeline::verify;
use tessel_compiler::passes::{
    AlgebraicSimplifier, CallInliner, ConstantFolding, Cse, Dce, Fusion, Pass, PassError, Pipeline,
    Scheduler, WhileLoopSimplifier,
};
use tessel_tests::golden::run_suite;
use tessel_tests::pass_golden::canonical;
use tessel_tests::{corpus_files, golden_dir};

#[test]
fn golden() {
    let dir = golden_dir().join("passes").join("pipeline");
    run_suite(&dir, "hlo", "expected", |input| {
        let mut m = parse_module_file(input).unwrap();
        let report = optimize(&mut m, &CompileOptions::default()).unwrap();
        format!(
            "// kernels: {} -> {}, fusions: {}\n{}",
            report.kernels_before,
            report.kernels_after,
            report.fusions,
            canonical(&m)
        )
    });
}

/// A pass that breaks the module: it gives the root a wrong shape.
struct Breaker;

impl Pass for Breaker {
    fn name(&self) -> &'static str {
        "breaker"
    }
    fn run(&mut self, m: &mut Module) -> Result<bool, PassError> {
        let root = m.entry().root();
        m.entry_mut().get_mut(root).shape = tessel_compiler::ir::Shape::Token;
        Ok(true)
    }
}

fn small_module() -> Module {
    let path = golden_dir().join("passes/pipeline/softmax.hlo");
    parse_module_file(&path).unwrap()
}

#[test]
fn the_verifier_names_the_pass_that_broke_the_module() {
    let mut p = Pipeline::new("test");
    p.add_pass(Dce).add_pass(Breaker).add_pass(Cse);
    p.set_verifier(Box::new(verify));
    let mut m = small_module();
    let err = p.run(&mut m, None).unwrap_err();
    assert_eq!(err.pass, "breaker", "{err}");
}

/// The verifier runs after the passes that changed the module, not after the others: a pass
/// that reports no change (its reports are checked below) left what the last check saw.
#[test]
fn the_verifier_runs_after_each_change_only() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let checks = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&checks);
    let mut p = Pipeline::new("test");
    // On a clean module DCE and CSE change nothing; each `Restless` run claims a change.
    p.add_pass(Dce)
        .add_pass(Restless(0))
        .add_pass(Cse)
        .add_pass(Restless(0));
    p.set_verifier(Box::new(move |m: &Module| {
        counted.fetch_add(1, Ordering::Relaxed);
        verify(m)
    }));
    let mut m = small_module();
    Dce.run(&mut m).unwrap();
    Cse.run(&mut m).unwrap();
    let records = p.run(&mut m, None).unwrap();
    let changed = records.iter().filter(|r| r.changed).count();
    assert_eq!(changed, 2, "{records:?}");
    assert_eq!(checks.load(Ordering::Relaxed), changed);
}

/// A pass that always claims a change, to check the fixed-point cap.
struct Restless(usize);

impl Pass for Restless {
    fn name(&self) -> &'static str {
        "restless"
    }
    fn run(&mut self, _: &mut Module) -> Result<bool, PassError> {
        self.0 += 1;
        Ok(true)
    }
}

#[test]
fn fixed_points_stop_at_their_cap_and_when_nothing_changes() {
    let mut p = Pipeline::new("test");
    p.add_fixed_point("busy", vec![Box::new(Restless(0))], 5);
    p.add_fixed_point("calm", vec![Box::new(Dce), Box::new(Cse)], 5);
    let mut m = small_module();
    let records = p.run(&mut m, None).unwrap();
    let busy = records.iter().filter(|r| r.pass == "restless").count();
    assert_eq!(busy, 5);
    // The softmax module has nothing for DCE or CSE: one round, then stop.
    let calm = records
        .iter()
        .filter(|r| r.group.as_deref() == Some("calm"))
        .count();
    assert_eq!(calm, 2);
}

#[test]
fn hook_sees_every_pass_in_order() {
    let mut p = Pipeline::new("test");
    p.add_pass(CallInliner)
        .add_pass(Dce)
        .add_pass(Fusion::default());
    let mut seen = Vec::new();
    let mut hook =
        |r: &tessel_compiler::passes::pipeline::PassRecord, _: &Module| seen.push(r.pass.clone());
    let mut m = small_module();
    p.run(&mut m, Some(&mut hook)).unwrap();
    assert_eq!(seen, ["call-inliner", "dce", "fusion"]);
}

/// Runs every pass, in pipeline order, on every corpus module; a pass that reports no change
/// must leave the printed module exactly as it was.
#[test]
fn every_pass_reports_changes_honestly_on_the_corpus() {
    let make: Vec<fn() -> Box<dyn Pass>> = vec![
        || Box::new(CallInliner),
        || Box::new(AlgebraicSimplifier),
        || Box::new(Dce),
        || Box::new(WhileLoopSimplifier),
        || Box::new(ConstantFolding::default()),
        || Box::new(Cse),
        || Box::new(Dce),
    ];
    for file in corpus_files() {
        let mut m = parse_module_file(&file).unwrap();
        let mut schedule: Vec<Box<dyn Pass>> = Vec::new();
        for _ in 0..2 {
            schedule.extend(make.iter().map(|f| f()));
        }
        schedule.push(Box::new(Fusion::default()));
        schedule.push(Box::new(Dce));
        schedule.push(Box::new(Scheduler));
        schedule.push(Box::new(Scheduler));
        let mut unchanged_runs = 0;
        for mut pass in schedule {
            let before = canonical(&m);
            let changed = pass.run(&mut m).unwrap();
            if !changed {
                unchanged_runs += 1;
                assert_eq!(
                    before,
                    canonical(&m),
                    "{} reported no change on {} but changed it",
                    pass.name(),
                    file.display()
                );
            }
            verify(&m).unwrap_or_else(|e| {
                panic!(
                    "{} broke {}: {}",
                    pass.name(),
                    file.display(),
                    tessel_compiler::verifier::join(&e)
                )
            });
        }
        assert!(unchanged_runs > 0, "no pass ever reported 'unchanged'");
    }
}
