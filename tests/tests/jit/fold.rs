//! What the tests of the folds share (`conv_bias.rs`, `conv_pool.rs`): a fold is an option the
//! JIT can turn off, which must not change a single bit, and a count of what it folded.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Literal, Module};
use tessel_runtime::jit::{compile, JitOptions, ProgramStats};
use tessel_tests::numerics::{compare_literals, pseudo_random_f32, Tolerance};

/// A fold: how to turn it on or off, and what to count in the compiled program.
pub struct Fold {
    pub set: fn(&mut JitOptions, bool),
    pub count: fn(&ProgramStats) -> usize,
}

impl Fold {
    /// The outputs' bytes and the count with the fold on or off, on `threads` threads.
    pub fn run(
        &self,
        m: &Module,
        args: &[Literal],
        on: bool,
        threads: usize,
    ) -> (Vec<Vec<u8>>, usize) {
        let mut options = JitOptions {
            gemm_threads: threads,
            ..Default::default()
        };
        (self.set)(&mut options, on);
        let exe = compile(m, &options).expect("compiles");
        let out = exe.run(args).expect("runs");
        let bytes = out.leaves().iter().map(|a| a.data.to_le_bytes()).collect();
        (bytes, (self.count)(exe.stats()))
    }

    /// Checks `text` (optimized first) with the fold on and off, on 1 and 2 threads: the
    /// same bits, and the interpreter's result within tolerance. Returns the counts (on, off)
    /// per thread count.
    pub fn check(&self, text: &str, args: &[Literal]) -> Vec<(usize, usize)> {
        let mut module = parse_module(text, None).expect("parses");
        optimize(&mut module, &CompileOptions::default()).expect("optimizes");
        let mut counts = Vec::new();
        for threads in [1, 2] {
            let (on, on_count) = self.run(&module, args, true, threads);
            let (off, off_count) = self.run(&module, args, false, threads);
            if let Some(at) = first_difference(&on, &off) {
                panic!("fold on and off differ ({threads} threads): {at}\n{text}");
            }
            counts.push((on_count, off_count));
        }
        let want = evaluate(&module, args).expect("interprets");
        let got = compile(&module, &JitOptions::default())
            .expect("compiles")
            .run(args)
            .expect("runs");
        let tol = Tolerance {
            atol: 2e-3,
            rtol: 1e-4,
        };
        compare_literals(&got, &want, tol).expect("matches the interpreter");
        counts
    }
}

/// Where two runs' output bytes first differ (output number and index of the first differing
/// 4-byte word, the element of an f32 output), if they do: a failure names the place instead
/// of printing whole arrays.
fn first_difference(a: &[Vec<u8>], b: &[Vec<u8>]) -> Option<String> {
    if a.len() != b.len() {
        return Some(format!("{} outputs against {}", a.len(), b.len()));
    }
    a.iter().zip(b).enumerate().find_map(|(k, (x, y))| {
        let at = x.chunks(4).zip(y.chunks(4)).position(|(p, q)| p != q);
        match at {
            Some(i) => Some(format!("output {k}, 4-byte word {i}")),
            None => (x.len() != y.len()).then(|| format!("output {k}: lengths differ")),
        }
    })
}

/// Arguments of a conv layer's module: `x` in NHWC, a 5x5 HWIO kernel to `o` channels, and
/// a bias of `o`.
pub fn conv_layer_args(x: [i64; 4], o: i64) -> Vec<Literal> {
    vec![
        pseudo_random_f32(&x, 1, 0),
        pseudo_random_f32(&[5, 5, x[3], o], 2, 0),
        pseudo_random_f32(&[o], 3, 0),
    ]
}

/// A small xorshift generator from `seed` (not 0): each call gives a number below its argument.
/// The random layer tests draw their shapes from it, so a failure names a reproducible case.
pub fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut s = seed;
    move |n| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % n
    }
}
