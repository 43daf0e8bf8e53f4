//! Programs whose size used to break the JIT: a chain of 10,000 elementwise ops (the fusion
//! pass and the JIT's own fusion plan put it in one kernel, emitted recursively: a stack
//! overflow), and a reduce-window with a huge window (listed position by position before
//! being refused: gigabytes and minutes). Fusions and fused chains are now bounded, and the
//! window size is checked before anything is compiled.

use std::time::{Duration, Instant};
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_runtime::jit::{compile, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

/// `x_{k+1} = (x_k + p) * 0.5` for `n` ops in a row, on `f32[8]`.
fn chain(n: usize) -> String {
    let mut s = String::from(
        "HloModule chain\n\nENTRY main {\n  p = f32[8] parameter(0)\n  c = f32[] constant(0.5)\n  \
         half = f32[8] broadcast(c), dimensions={}\n",
    );
    let mut prev = "p".to_string();
    for k in 0..n {
        let name = format!("v{k}");
        let root = if k + 1 == n { "ROOT " } else { "" };
        let op = if k % 2 == 0 {
            format!("add({prev}, p)")
        } else {
            format!("multiply({prev}, half)")
        };
        s.push_str(&format!("  {root}{name} = f32[8] {op}\n"));
        prev = name;
    }
    s.push_str("}\n");
    s
}

#[test]
fn ten_thousand_op_chain_runs_on_the_jit() {
    let text = chain(10_000);
    let args = [pseudo_random_f32(&[8], 1, 0)];
    for opt in [false, true] {
        let mut module = parse_module(&text, None).unwrap();
        if opt {
            optimize(&mut module, &CompileOptions::default()).unwrap();
        }
        let want = evaluate(&module, &args).unwrap();
        let exe = compile(&module, &JitOptions::default()).unwrap();
        let got = exe.run(&args).unwrap();
        let (g, w) = (&got.leaves()[0], &want.leaves()[0]);
        for i in 0..8 {
            let (x, y) = (g.data.get_f64(i), w.data.get_f64(i));
            assert!(
                (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                "opt={opt} element {i}: jit {x} vs interpreter {y}"
            );
        }
    }
}

#[test]
fn huge_reduce_window_is_refused_before_any_work() {
    let text = "HloModule rw\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
                ROOT r = f32[] add(a, b)\n}\n\nENTRY main {\n  p = f32[20000,20000] parameter(0)\n  \
                c = f32[] constant(0)\n  ROOT big = f32[1,1] reduce-window(p, c), \
                window={size=20000x20000}, to_apply=add\n}\n";
    let module = parse_module(text, None).unwrap();
    let start = Instant::now();
    let err = compile(&module, &JitOptions::default())
        .err()
        .expect("refused");
    // Listing the 4e8 window positions took minutes and over 9.5 GB.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let msg = err.to_string();
    assert!(
        msg.contains("reduce-window big") && msg.contains("400000000 elements"),
        "{msg}"
    );
}
