//! The max-pool fusions the JIT hands to the pooling routines (`jit/routines/pool_match.rs`):
//! the forward max-pool of a ReLU and the max-pool gradient with its ReLU gate and bias sum,
//! on the MNIST step's form and on odd shapes, with NaN, signed zeros and ties in the data.
//! The routine must be taken (no generated kernel is left) and give the interpreter's values
//! bitwise (integer-valued gradients keep the bias sums exact) on 1 and 2 threads.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, Literal, Module};
use tessel_runtime::jit::{compile, JitOptions};

const REGIONS: &str = "max {
  ma = f32[] parameter(0)
  mb = f32[] parameter(1)
  ROOT mm = f32[] maximum(ma, mb)
}
ge {
  ga = f32[] parameter(0)
  gb = f32[] parameter(1)
  ROOT gc = pred[] compare(ga, gb), direction=GE
}
add {
  ap = f32[] parameter(0)
  aq = f32[] parameter(1)
  ROOT as = f32[] add(ap, aq)
}
";

fn optimized(body: &str) -> Module {
    let text = format!("HloModule m\n{REGIONS}ENTRY e {{\n{body}\n}}\n");
    let mut m = parse_module(&text, None).unwrap();
    optimize(&mut m, &CompileOptions::default()).unwrap();
    m
}

/// Small integers, with NaN, -0 and +0 among them (many ties in every window).
fn values(dims: &[i64], seed: u32, nan: bool) -> Literal {
    let n: i64 = dims.iter().product();
    let mut s = seed.wrapping_mul(2654435761) | 1;
    let v = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            match s % 29 {
                0 if nan => f32::NAN,
                1 => -0.0,
                2 => 0.0,
                k => (k % 7) as f32 - 3.0,
            }
        })
        .collect();
    Literal::Array(Array::f32(dims, v))
}

fn same(a: &Literal, b: &Literal) -> bool {
    let (a, b) = (a.leaves(), b.leaves());
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            let (x, y) = (x.data.to_le_bytes(), y.data.to_le_bytes());
            x.chunks(4).zip(y.chunks(4)).all(|(p, q)| {
                let (p, q) = (
                    f32::from_le_bytes(p.try_into().unwrap()),
                    f32::from_le_bytes(q.try_into().unwrap()),
                );
                (p.is_nan() && q.is_nan()) || p.to_bits() == q.to_bits()
            })
        })
}

/// Runs on 1 and 2 threads: the routine is taken (no kernel), the values the interpreter's.
fn check(m: &Module, args: &[Literal]) {
    let want = evaluate(m, args).unwrap();
    for threads in [1, 2] {
        let options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        let exe = compile(m, &options).unwrap();
        assert_eq!(exe.stats().kernels, 0, "a generated kernel is left");
        let got = exe.run(args).unwrap();
        assert!(same(&got, &want), "{threads} threads: jit differs");
    }
}

fn forward(n: i64, h: i64, w: i64, c: i64, k: i64, s: i64) -> (Module, Vec<Literal>) {
    let (oh, ow) = ((h - k) / s + 1, (w - k) / s + 1);
    let body = format!(
        "  z = f32[{n},{h},{w},{c}] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[{n},{h},{w},{c}] broadcast(zero), dimensions={{}}
  ninf = f32[] constant(-inf)
  relu = f32[{n},{h},{w},{c}] maximum(z, zeros)
  ROOT p = f32[{n},{oh},{ow},{c}] reduce-window(relu, ninf), window={{size=1x{k}x{k}x1 stride=1x{s}x{s}x1}}, to_apply=max"
    );
    (optimized(&body), vec![values(&[n, h, w, c], 3, true)])
}

#[test]
fn forward_max_pool_of_a_relu() {
    for (n, h, w, c, k, s) in [
        (4, 28, 28, 32, 2, 2),
        (3, 7, 9, 17, 3, 2),
        (2, 5, 4, 3, 2, 2),
    ] {
        let (m, args) = forward(n, h, w, c, k, s);
        check(&m, &args);
    }
}

fn backward(n: i64, h: i64, c: i64, reshaped: bool) -> (Module, Vec<Literal>) {
    let hh = h / 2;
    let g = if reshaped {
        format!(
            "  flat = f32[{n},{}] parameter(1)
  g = f32[{n},{hh},{hh},{c}] reshape(flat)",
            hh * hh * c
        )
    } else {
        format!("  g = f32[{n},{hh},{hh},{c}] parameter(1)")
    };
    let body = format!(
        "  z = f32[{n},{h},{h},{c}] parameter(0)
{g}
  zero = f32[] constant(0)
  zeros = f32[{n},{h},{h},{c}] broadcast(zero), dimensions={{}}
  relu = f32[{n},{h},{h},{c}] maximum(z, zeros)
  pos = pred[{n},{h},{h},{c}] compare(z, zeros), direction=GT
  grad = f32[{n},{h},{h},{c}] select-and-scatter(relu, g, zero), window={{size=1x2x2x1 stride=1x2x2x1}}, select=ge, scatter=add
  d = f32[{n},{h},{h},{c}] select(pos, grad, zeros)
  bias = f32[{c}] reduce(d, zero), dimensions={{0,1,2}}, to_apply=add
  ROOT t = (f32[{n},{h},{h},{c}], f32[{c}]) tuple(d, bias)"
    );
    let gdims: Vec<i64> = if reshaped {
        vec![n, hh * hh * c]
    } else {
        vec![n, hh, hh, c]
    };
    let args = vec![values(&[n, h, h, c], 5, true), values(&gdims, 7, false)];
    (optimized(&body), args)
}

#[test]
fn max_pool_gradient_with_relu_gate_and_bias_sum() {
    // Large enough for the bias sum to be cut in two (`reduce::reduce_split`), and small.
    for (n, h, c, reshaped) in [
        (9, 28, 32, false),
        (8, 14, 64, true),
        (3, 6, 17, false),
        (1, 2, 1, true),
    ] {
        let (m, args) = backward(n, h, c, reshaped);
        check(&m, &args);
    }
}

/// `max(0, z)` keeps `+0` for `z = -0` where `max(z, 0)` keeps `-0`: not the routine's form,
/// so the generated kernels compute it.
#[test]
fn other_operand_order_is_not_taken() {
    let body = "  z = f32[2,4,4,8] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[2,4,4,8] broadcast(zero), dimensions={}
  ninf = f32[] constant(-inf)
  relu = f32[2,4,4,8] maximum(zeros, z)
  ROOT p = f32[2,2,2,8] reduce-window(relu, ninf), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=max";
    let m = optimized(body);
    let args = vec![values(&[2, 4, 4, 8], 9, true)];
    let exe = compile(&m, &JitOptions::default()).unwrap();
    assert!(exe.stats().kernels > 0);
    assert!(same(
        &exe.run(&args).unwrap(),
        &evaluate(&m, &args).unwrap()
    ));
}

/// Two conv/ReLU/max-pool layers traced with tessel's API, as `tf.layers` builds them,
/// differentiated by tessel's autodiff and optimized: both ReLU/max-pool pairs take the
/// routines, forward and gradient. Regression: ReLU's gradient was `max`'s tie split (`g / 2`
/// at 0), a form the routine does not compute, so the estimator's two largest fusions ran as
/// generated kernels (2.5 + 1.6 ms of a 27 ms step).
#[test]
fn traced_conv_layers_take_the_pooling_routines_forward_and_backward() {
    use tessel_compiler::autodiff::grad_module;
    use tessel_compiler::ir::{ElementType::F32, Op};
    use tessel_compiler::trace::{Padding, Tensor, Tracer};
    use tessel_runtime::jit::routines::pool_match::{match_pool_fusion, PoolMatch};
    let mut t = Tracer::new("conv_layers");
    let w1 = t.parameter("w1", &[5, 5, 1, 8], F32);
    let b1 = t.parameter("b1", &[8], F32);
    let w2 = t.parameter("w2", &[5, 5, 8, 16], F32);
    let b2 = t.parameter("b2", &[16], F32);
    let x = t.parameter("x", &[4, 12, 12, 1], F32);
    let target = t.parameter("target", &[4, 3, 3, 16], F32);
    let layer = |x: &Tensor, w: &Tensor, b: &Tensor| {
        let y = (x.conv2d(w, [1, 1], Padding::Same) + b).relu();
        y.max_pool([2, 2], [2, 2], Padding::Same)
    };
    let y = layer(&layer(&x, &w1, &b1), &w2, &b2);
    let loss = (&y * &target).reduce_sum(&[0, 1, 2, 3], false);
    let m = t.finish(&[&loss]).unwrap();
    let mut g = grad_module(&m, &[0, 1, 2, 3]).unwrap();
    optimize(&mut g, &CompileOptions::default()).unwrap();
    let (mut forward, mut backward) = (0, 0);
    for (_, instr) in g.entry().instructions() {
        if let Op::Fusion { calls, .. } = instr.op {
            match match_pool_fusion(&g, g.computation(calls)) {
                Some(PoolMatch::Forward { relu: true, .. }) => forward += 1,
                Some(PoolMatch::Backward { relu: true, .. }) => backward += 1,
                _ => {}
            }
        }
    }
    assert_eq!((forward, backward), (2, 2));
}
