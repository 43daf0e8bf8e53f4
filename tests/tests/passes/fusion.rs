//! Golden cases for fusion (`tests/golden/passes/fusion/`), and the kernel count of the MNIST
//! training step before and after the pipeline.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::Op;
use tessel_compiler::passes::stats::kernel_count;
use tessel_compiler::passes::Fusion;
use tessel_tests::corpus_dir;
use tessel_tests::pass_golden::run_pass_suite;

#[test]
fn golden() {
    run_pass_suite("fusion", || Box::new(Fusion::default()));
}

#[test]
fn fusion_cuts_the_kernels_of_the_mnist_step() {
    let path = corpus_dir().unwrap().join("mnist_cnn_train_step_b8.hlo");
    let mut m = parse_module_file(&path).unwrap();
    let before = kernel_count(&m);
    let report = optimize(&mut m, &CompileOptions::default()).unwrap();
    assert_eq!(report.kernels_before, before);
    assert!(report.fusions >= 20, "only {} fusions", report.fusions);
    assert!(
        report.kernels_after * 2 < before,
        "kernels {before} -> {}",
        report.kernels_after
    );
    // Dots and convolutions stay library calls, never inside a fusion.
    for cid in m.computation_ids() {
        let c = m.computation(cid);
        for &id in c.ids() {
            if let Op::Fusion { calls, .. } = c.get(id).op {
                let f = m.computation(calls);
                assert!(f
                    .ids()
                    .iter()
                    .all(|&x| !matches!(f.get(x).op, Op::Dot(_) | Op::Convolution(_))));
            }
        }
    }
}
