//! Random bits as device dropout draws them: Threefry-2x32's two words, concatenated. The
//! `threefry-rounds` pass turns the rounds into one custom call that the JIT runs as a
//! vectorized routine (`compiler/src/passes/threefry_rounds.rs`); a chain it does not match
//! stays instructions, whose words the fusion pass stores from one multi-output fusion
//! (`compiler/src/passes/fusion_concat.rs`), and the JIT shifts by constant amounts without
//! a range test (`jit/clif/element_ops.rs`). Every path must give the bits the interpreter
//! computes from the module as written, on one thread and on two.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal, Module, Op};
use tessel_compiler::passes::threefry_rounds::{key_words, THREEFRY_ROUNDS_TARGET};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_tests::numerics::pseudo_random_f32;

fn bits(l: &Literal) -> Vec<Vec<u8>> {
    l.leaves().iter().map(|a| a.data.to_le_bytes()).collect()
}

fn optimized(text: &str) -> Module {
    let mut module = parse_module(text, None).unwrap();
    optimize(&mut module, &CompileOptions::default()).unwrap();
    module
}

/// The module as written, optimized and on the JIT with 1 and 2 threads, equals the
/// interpreter on the module as written, bit for bit.
fn check_bitwise(text: &str, args: &[Literal]) {
    let want = evaluate(&parse_module(text, None).unwrap(), args).unwrap();
    let module = optimized(text);
    for threads in [1, 2] {
        let options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        let got = compile(&module, &options).unwrap().run(args).unwrap();
        assert!(
            bits(&got) == bits(&want),
            "{threads} thread(s): the JIT's bits differ from the interpreter's"
        );
    }
}

/// How a test's Threefry chain deviates from `estimator/src/model/random.rs`'s.
#[derive(Clone, Copy, PartialEq)]
enum Chain {
    /// As tessel traces it.
    Tessel,
    /// JAX's key injection: `x1 + ks + i` as two adds.
    TwoAdds,
    /// One rotation amount changed: not Threefry, so not the custom call.
    WrongRotation,
}

/// Threefry-2x32-20 on `half` counters (the key words are parameters), its two words
/// concatenated into `[rows, cols]` (with `rows * cols == 2 * half`) and turned into uniform
/// floats, as `estimator/src/model/random.rs` traces it (or deviating as `chain` says).
fn threefry_dropout_module(half: i64, rows: i64, cols: i64, chain: Chain) -> String {
    const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    let mut s = String::from("HloModule threefry\nENTRY e {\n");
    s += "  key0 = u32[] parameter(0)\n  key1 = u32[] parameter(1)\n";
    s += "  parity = u32[] constant(466688986)\n  kx = u32[] xor(key0, key1)\n  key2 = u32[] xor(kx, parity)\n";
    for k in 0..3 {
        s += &format!("  ks{k} = u32[{half}] broadcast(key{k}), dimensions={{}}\n");
    }
    s += &format!("  i = u32[{half}] iota(), iota_dimension=0\n");
    s += &format!("  op = u32[] constant(1)\n  opb = u32[{half}] broadcast(op), dimensions={{}}\n");
    s += &format!("  x0_0 = u32[{half}] add(i, ks0)\n  x1_0 = u32[{half}] add(opb, ks1)\n");
    let mut n = 0;
    let (mut x0, mut x1) = ("x0_0".to_string(), "x1_0".to_string());
    for round in 0..5 {
        for &r in &ROTATIONS[round % 2] {
            n += 1;
            let r = if chain == Chain::WrongRotation && n == 7 {
                r + 1
            } else {
                r
            };
            let v = |name: &str| format!("{name}_{n}");
            s += &format!("  {} = u32[] constant({r})\n", v("r"));
            s += &format!("  {} = u32[] constant({})\n", v("q"), 32 - r);
            s += &format!(
                "  {} = u32[{half}] broadcast({}), dimensions={{}}\n",
                v("rb"),
                v("r")
            );
            s += &format!(
                "  {} = u32[{half}] broadcast({}), dimensions={{}}\n",
                v("qb"),
                v("q")
            );
            s += &format!("  {} = u32[{half}] add({x0}, {x1})\n", v("a"));
            s += &format!("  {} = u32[{half}] shift-left({x1}, {})\n", v("l"), v("rb"));
            s += &format!(
                "  {} = u32[{half}] shift-right-logical({x1}, {})\n",
                v("h"),
                v("qb")
            );
            s += &format!("  {} = u32[{half}] or({}, {})\n", v("o"), v("l"), v("h"));
            s += &format!("  {} = u32[{half}] xor({}, {})\n", v("b"), v("o"), v("a"));
            (x0, x1) = (v("a"), v("b"));
        }
        let (p, q) = ((round + 1) % 3, (round + 2) % 3);
        s += &format!("  inj_{round} = u32[] constant({})\n", round + 1);
        s += &format!("  y0_{round} = u32[{half}] add({x0}, ks{p})\n");
        if chain == Chain::TwoAdds {
            s += &format!("  ib_{round} = u32[{half}] broadcast(inj_{round}), dimensions={{}}\n");
            s += &format!("  z1_{round} = u32[{half}] add({x1}, ks{q})\n");
            s += &format!("  y1_{round} = u32[{half}] add(z1_{round}, ib_{round})\n");
        } else {
            s += &format!("  kq_{round} = u32[] add(key{q}, inj_{round})\n");
            s += &format!("  kqb_{round} = u32[{half}] broadcast(kq_{round}), dimensions={{}}\n");
            s += &format!("  y1_{round} = u32[{half}] add({x1}, kqb_{round})\n");
        }
        (x0, x1) = (format!("y0_{round}"), format!("y1_{round}"));
    }
    let n2 = 2 * half;
    s += &format!("  words = u32[{n2}] concatenate({x0}, {x1}), dimensions={{0}}\n");
    s += &format!("  grid = u32[{rows},{cols}] reshape(words)\n");
    s += "  nine = u32[] constant(9)\n  one_bits = u32[] constant(1065353216)\n";
    s += &format!("  nb = u32[{rows},{cols}] broadcast(nine), dimensions={{}}\n");
    s += &format!("  ob = u32[{rows},{cols}] broadcast(one_bits), dimensions={{}}\n");
    s += &format!("  m = u32[{rows},{cols}] shift-right-logical(grid, nb)\n");
    s += &format!("  f = u32[{rows},{cols}] or(m, ob)\n");
    s += &format!("  g = f32[{rows},{cols}] bitcast-convert(f)\n");
    s += "  onef = f32[] constant(1)\n";
    s += &format!("  onefb = f32[{rows},{cols}] broadcast(onef), dimensions={{}}\n");
    s += &format!("  ROOT u = f32[{rows},{cols}] subtract(g, onefb)\n}}\n");
    s
}

fn keys() -> [Literal; 2] {
    let word = |w: u32| {
        Literal::Array(Array::new(
            ArrayShape::scalar(ElementType::U32),
            ArrayData::U32(vec![w]),
        ))
    };
    [word(0x1319_8a2e), word(0x0370_7344)]
}

/// Custom calls to Threefry's rounds in the optimized module, and the most binary
/// instructions any one computation holds.
fn rounds_calls_and_binaries(module: &Module) -> (usize, usize) {
    let mut calls = 0;
    let mut most = 0;
    for id in module.computation_ids() {
        let c = module.computation(id);
        let order = c.post_order();
        calls += order
            .iter()
            .filter(|&&x| matches!(&c.get(x).op, Op::CustomCall { target, .. } if target == THREEFRY_ROUNDS_TARGET))
            .count();
        let binary = order
            .iter()
            .filter(|&&x| matches!(c.get(x).op, Op::Binary(_)))
            .count();
        most = most.max(binary);
    }
    (calls, most)
}

/// The chain is computed once per counter, by a two-output fusion whose outputs the
/// concatenate reads; no fused computation holds both the concatenate and the chain.
fn assert_words_are_stored(module: &Module) {
    for id in module.computation_ids() {
        let c = module.computation(id);
        let order = c.post_order();
        let concat = order
            .iter()
            .any(|&x| matches!(c.get(x).op, Op::Concatenate { .. }));
        let binary = order
            .iter()
            .filter(|&&x| matches!(c.get(x).op, Op::Binary(_)))
            .count();
        assert!(
            !(concat && binary > 20),
            "the Threefry chain ({binary} ops) was fused into the concatenate's kernel"
        );
    }
    let entry = module.entry();
    assert!(entry.post_order().iter().any(|&x| {
        matches!(entry.get(x).op, Op::Fusion { .. })
            && matches!(&entry.get(x).shape, tessel_compiler::ir::Shape::Tuple(t) if t.len() == 2)
    }));
}

#[test]
fn threefry_words_concatenated_into_a_dropout_mask() {
    let text = threefry_dropout_module(131_072, 256, 1024, Chain::Tessel);
    let (calls, most) = rounds_calls_and_binaries(&optimized(&text));
    assert!(
        calls == 1 && most < 20,
        "{calls} calls, {most} binary instructions"
    );
    check_bitwise(&text, &keys());
}

/// An odd number of words per half: the routine ends in its scalar tail, and the
/// concatenate's boundary falls inside a row of the mask.
#[test]
fn threefry_words_with_scalar_tails() {
    let text = threefry_dropout_module(10_001, 2, 10_001, Chain::Tessel);
    assert_eq!(rounds_calls_and_binaries(&optimized(&text)).0, 1);
    check_bitwise(&text, &keys());
}

/// JAX adds the key word and the round number to the second word in two adds: one call
/// still, with their sum as its added word.
#[test]
fn threefry_with_two_adds_per_injection() {
    let text = threefry_dropout_module(4096, 8, 1024, Chain::TwoAdds);
    assert_eq!(rounds_calls_and_binaries(&optimized(&text)).0, 1);
    check_bitwise(&text, &keys());
}

/// A chain with one rotation amount off is not Threefry: it stays instructions, computed
/// once per counter by a two-output fusion.
#[test]
fn a_chain_with_another_rotation_stays_instructions() {
    let text = threefry_dropout_module(131_072, 256, 1024, Chain::WrongRotation);
    let module = optimized(&text);
    assert_eq!(rounds_calls_and_binaries(&module).0, 0);
    assert_words_are_stored(&module);
    check_bitwise(&text, &keys());
}

/// Shifts by constant amounts, in vector code and in the scalar tail, with XLA's results
/// for amounts at or past the width: 0 for the logical shifts, the sign for the arithmetic one.
#[test]
fn shifts_by_constant_amounts_match_the_interpreter() {
    let amounts: [u32; 7] = [0, 1, 5, 31, 32, 33, u32::MAX];
    let mut s = String::from("HloModule shifts\nENTRY e {\n  p = f32[1027] parameter(0)\n");
    s += "  x = u32[1027] bitcast-convert(p)\n  y = s32[1027] bitcast-convert(p)\n";
    let mut outs = Vec::new();
    for (k, a) in amounts.iter().enumerate() {
        s += &format!("  au{k} = u32[] constant({a})\n");
        s += &format!("  as{k} = s32[] constant({})\n", *a as i32);
        s += &format!("  bu{k} = u32[1027] broadcast(au{k}), dimensions={{}}\n");
        s += &format!("  bs{k} = s32[1027] broadcast(as{k}), dimensions={{}}\n");
        for (op, name, ty, b) in [
            ("shift-left", "l", "u32", "bu"),
            ("shift-right-logical", "r", "u32", "bu"),
            ("shift-right-arithmetic", "a", "s32", "bs"),
            ("shift-right-logical", "rs", "s32", "bs"),
        ] {
            let operand = if ty == "u32" { "x" } else { "y" };
            s += &format!("  {name}{k} = {ty}[1027] {op}({operand}, {b}{k})\n");
            outs.push((format!("{name}{k}"), ty));
        }
    }
    let shapes: Vec<String> = outs.iter().map(|(_, t)| format!("{t}[1027]")).collect();
    let names: Vec<String> = outs.iter().map(|(n, _)| n.clone()).collect();
    s += &format!(
        "  ROOT out = ({}) tuple({})\n}}\n",
        shapes.join(", "),
        names.join(", ")
    );
    check_bitwise(&s, &[pseudo_random_f32(&[1027], 21, 0)]);
}

/// The custom call written by hand, with the key schedule of key (0x13198a2e, 0x03707344) as
/// its added words: both backends give Random123's known answer for counter
/// (0x243f6a88, 0x85a308d3) at every element, and a call with a wrong operand count is an
/// error on both, not a panic.
#[test]
fn the_rounds_call_gives_random123s_known_answer() {
    let added = key_words([0x1319_8a2e, 0x0370_7344]);
    let mut s = String::from("HloModule rounds\nENTRY e {\n");
    s += "  c0 = u32[] constant(608135816)\n  c1 = u32[] constant(2242054355)\n";
    let mut names = vec!["c0".to_string(), "c1".to_string()];
    for (k, a) in added.iter().enumerate() {
        s += &format!("  a{k} = u32[] constant({a})\n");
        names.push(format!("a{k}"));
    }
    let call = |operands: &[String]| {
        format!(
            "  ROOT r = (u32[1037], u32[1037]) custom-call({}), custom_call_target=\"{THREEFRY_ROUNDS_TARGET}\"\n}}\n",
            operands.join(", ")
        )
    };
    let text = s.clone() + &call(&names);
    let want = [0xc492_3a9cu32, 0x483d_f7a0];
    let module = parse_module(&text, None).unwrap();
    let interpreted = evaluate(&module, &[]).unwrap();
    let jitted = compile(&optimized(&text), &JitOptions::default())
        .unwrap()
        .run(&[])
        .unwrap();
    for out in [interpreted, jitted] {
        for (word, leaf) in want.iter().zip(out.leaves()) {
            let ArrayData::U32(w) = &leaf.data else {
                panic!("u32 words expected");
            };
            assert!(w.len() == 1037 && w.iter().all(|x| x == word));
        }
    }
    let short = s + &call(&names[..13]);
    let module = parse_module(&short, None).unwrap();
    assert!(evaluate(&module, &[]).is_err());
    let jit = compile(&optimized(&short), &JitOptions::default());
    assert!(jit.is_err() || jit.unwrap().run(&[]).is_err());
}
