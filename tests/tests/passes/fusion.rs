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

/// A chain of `n` elementwise ops on `f32[4]`, each also reading the parameter.
fn chain_reading_the_parameter(n: usize) -> String {
    let mut s = String::from("HloModule chain\n\nENTRY main {\n  p = f32[4] parameter(0)\n");
    let mut prev = "p".to_string();
    for k in 0..n {
        let root = if k + 1 == n { "ROOT " } else { "" };
        s.push_str(&format!("  {root}a{k} = f32[4] add({prev}, p)\n"));
        prev = format!("a{k}");
    }
    s.push_str("}\n");
    s
}

/// Every group of such a chain reads the parameter, so every pair of groups was a sibling
/// candidate whose dependency check walked the graph, and each fused member was removed with
/// a pass over the whole instruction order: a 64,000-op chain took 37 s to compile on a Zen 4
/// (1.5 s after the change), 200,000 ops did not finish in 5 minutes (12.5 s after). The bound
/// below is a guard against that growth coming back, with a wide margin, not a speed target.
#[test]
fn a_long_chain_whose_ops_all_read_one_parameter_fuses_without_pairwise_walks() {
    use std::time::{Duration, Instant};
    use tessel_compiler::hlo_text::parse_module;
    use tessel_compiler::passes::Pass;
    let n = 64_000;
    let mut m = parse_module(&chain_reading_the_parameter(n), None).unwrap();
    let start = Instant::now();
    assert!(Fusion::default().run(&mut m).unwrap());
    let took = start.elapsed();
    // Groups of at most MAX_FUSION_MEMBERS, none merged: each depends on the one before.
    let entry = m.entry();
    let fusions = entry
        .ids()
        .iter()
        .filter(|&&x| matches!(entry.get(x).op, Op::Fusion { .. }))
        .count();
    assert_eq!(
        fusions,
        n.div_ceil(tessel_compiler::passes::fusion::MAX_FUSION_MEMBERS)
    );
    assert!(took < Duration::from_secs(20), "fusion took {took:?}");
}

/// `x * broadcast(g OP v)`: a `[32]` value spread over `[64, 32]`.
fn scaled_by_a_channel_value(op: &str) -> String {
    format!(
        "HloModule scaled\n\nENTRY main {{\n  x = f32[64,32] parameter(0)\n  g = f32[32] parameter(1)\n  \
         v = f32[32] parameter(2)\n  s = f32[32] {op}(g, v)\n  t = f32[32] add(s, g)\n  \
         b = f32[64,32] broadcast(t), dimensions={{1}}\n  ROOT y = f32[64,32] multiply(x, b)\n}}\n"
    )
}

/// The fused computations' ops, per fusion of the entry.
fn ops_per_fusion(m: &tessel_compiler::ir::Module) -> Vec<Vec<String>> {
    let entry = m.entry();
    entry
        .ids()
        .iter()
        .filter_map(|&x| match entry.get(x).op {
            Op::Fusion { calls, .. } => {
                let f = m.computation(calls);
                Some(
                    f.ids()
                        .iter()
                        .map(|&i| format!("{:?}", f.get(i).op))
                        .collect(),
                )
            }
            _ => None,
        })
        .collect()
}

/// A per-channel divide broadcast over a large array is computed once per channel, in a small
/// fusion of its own, not once per element inside the large loop (batch normalization's
/// gradient: three divides per element made the Fashion-MNIST CNN's `dx` loop compute-bound).
/// A cheap per-channel value (a multiply and an add) still joins the loop.
#[test]
fn a_costly_channel_value_is_computed_outside_the_loop_that_broadcasts_it() {
    use tessel_compiler::hlo_text::parse_module;
    use tessel_compiler::passes::Pass;
    let mut m = parse_module(&scaled_by_a_channel_value("divide"), None).unwrap();
    assert!(Fusion::default().run(&mut m).unwrap());
    let fusions = ops_per_fusion(&m);
    assert_eq!(fusions.len(), 2, "{fusions:?}");
    for f in &fusions {
        let divides = f.iter().any(|o| o.contains("Divide"));
        let multiplies = f.iter().any(|o| o.contains("Multiply"));
        assert!(
            divides != multiplies,
            "divide and the large multiply together: {f:?}"
        );
    }

    let mut m = parse_module(&scaled_by_a_channel_value("multiply"), None).unwrap();
    assert!(Fusion::default().run(&mut m).unwrap());
    let fusions = ops_per_fusion(&m);
    assert_eq!(fusions.len(), 1, "{fusions:?}");
}
