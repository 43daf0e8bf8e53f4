//! Differential tests: random graphs of elementwise, shape and reduce ops on odd shapes
//! (dimensions 1, 3, 5, 17), compiled by the JIT (4-lane and scalar) and evaluated by the
//! interpreter. Graphs are unfused, so the JIT's own producer-into-consumer fusion decides
//! what is recomputed, which these graphs exercise too.

use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::*;
use tessel_runtime::jit::{compile, JitOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn dims(&mut self) -> Vec<i64> {
        const SIZES: [i64; 4] = [1, 3, 5, 17];
        let rank = 1 + self.below(3);
        (0..rank).map(|_| SIZES[self.below(4)]).collect()
    }
}

struct G {
    m: Module,
    vals: Vec<(InstrId, Vec<i64>)>,
    n: usize,
    sum: ComputationId,
}

impl G {
    fn add(&mut self, op: Op, dims: &[i64], ty: ElementType, operands: &[InstrId]) -> InstrId {
        self.n += 1;
        let name = format!("{}.{}", op.opcode_name(), self.n);
        let id = self
            .m
            .entry_mut()
            .add(Instruction::new(name, op, Shape::array(ty, dims)), operands);
        // Rank-0 results (a reduce of a vector) are not reused as operands.
        if ty == ElementType::F32 && !dims.is_empty() {
            self.vals.push((id, dims.to_vec()));
        }
        id
    }

    /// A value with exactly `dims`, broadcasting a scalar parameter-derived value if needed.
    fn with_dims(&mut self, rng: &mut Rng, dims: &[i64]) -> InstrId {
        let same: Vec<InstrId> = self
            .vals
            .iter()
            .filter(|(_, d)| d == dims)
            .map(|(i, _)| *i)
            .collect();
        if !same.is_empty() && rng.below(4) != 0 {
            return same[rng.below(same.len())];
        }
        // Broadcast a rank-1 value along one matching dimension, or a scalar constant.
        let ones: Vec<(InstrId, usize)> = self
            .vals
            .iter()
            .filter(|(_, d)| d.len() == 1)
            .filter_map(|(i, d)| dims.iter().position(|&x| x == d[0]).map(|p| (*i, p)))
            .collect();
        if let Some(&(src, p)) = ones.get(rng.below(ones.len().max(1))) {
            return self.add(
                Op::Broadcast {
                    dimensions: vec![p as i64],
                },
                dims,
                ElementType::F32,
                &[src],
            );
        }
        let c = self.add(
            Op::Constant(Literal::Array(Array::scalar_f32(0.75))),
            &[],
            ElementType::F32,
            &[],
        );
        self.add(
            Op::Broadcast { dimensions: vec![] },
            dims,
            ElementType::F32,
            &[c],
        )
    }

    fn step(&mut self, rng: &mut Rng) {
        let (x, dims) = self.vals[rng.below(self.vals.len())].clone();
        let f = ElementType::F32;
        match rng.below(10) {
            0 | 1 => {
                const U: [UnaryOp; 7] = [
                    UnaryOp::Tanh,
                    UnaryOp::Sine,
                    UnaryOp::Negate,
                    UnaryOp::Abs,
                    UnaryOp::Logistic,
                    UnaryOp::Cosine,
                    UnaryOp::Exp,
                ];
                let u = U[rng.below(U.len())];
                let x = if u == UnaryOp::Exp {
                    // exp of a bounded value: tanh first keeps results comparable.
                    self.add(Op::Unary(UnaryOp::Tanh), &dims, f, &[x])
                } else {
                    x
                };
                self.add(Op::Unary(u), &dims, f, &[x]);
            }
            2 | 3 => {
                const B: [BinaryOp; 5] = [
                    BinaryOp::Add,
                    BinaryOp::Multiply,
                    BinaryOp::Subtract,
                    BinaryOp::Maximum,
                    BinaryOp::Minimum,
                ];
                let y = self.with_dims(rng, &dims);
                self.add(Op::Binary(B[rng.below(B.len())]), &dims, f, &[x, y]);
            }
            4 if dims.len() >= 2 => {
                let mut perm: Vec<i64> = (0..dims.len() as i64).collect();
                perm.rotate_left(1 + rng.below(dims.len() - 1));
                let out: Vec<i64> = perm.iter().map(|&p| dims[p as usize]).collect();
                self.add(Op::Transpose { permutation: perm }, &out, f, &[x]);
            }
            5 => {
                let d = rng.below(dims.len());
                let mut out = dims.clone();
                out.remove(d);
                let z = self.add(
                    Op::Constant(Literal::Array(Array::scalar_f32(0.0))),
                    &[],
                    f,
                    &[],
                );
                self.add(
                    Op::Reduce {
                        dimensions: vec![d as i64],
                        to_apply: self.sum,
                    },
                    &out,
                    f,
                    &[x, z],
                );
            }
            6 => {
                let d = rng.below(dims.len());
                let sl: Vec<SliceDim> = dims
                    .iter()
                    .enumerate()
                    .map(|(k, &n)| {
                        if k == d && n > 1 {
                            SliceDim {
                                start: 1,
                                limit: n,
                                stride: 2,
                            }
                        } else {
                            SliceDim {
                                start: 0,
                                limit: n,
                                stride: 1,
                            }
                        }
                    })
                    .collect();
                let out: Vec<i64> = sl
                    .iter()
                    .map(|s| (s.limit - s.start + s.stride - 1) / s.stride)
                    .collect();
                self.add(Op::Slice { dims: sl }, &out, f, &[x]);
            }
            7 => {
                let z = self.add(
                    Op::Constant(Literal::Array(Array::scalar_f32(-1.5))),
                    &[],
                    f,
                    &[],
                );
                let pd: Vec<PadDim> = dims
                    .iter()
                    .map(|_| PadDim {
                        low: rng.below(2) as i64,
                        high: 1,
                        interior: rng.below(2) as i64,
                    })
                    .collect();
                let out: Vec<i64> = dims
                    .iter()
                    .zip(&pd)
                    .map(|(&n, p)| p.low + p.high + n + (n - 1).max(0) * p.interior)
                    .collect();
                self.add(Op::Pad { dims: pd }, &out, f, &[x, z]);
            }
            8 => {
                let d = rng.below(dims.len());
                let mut out = dims.clone();
                out[d] *= 2;
                let y = self.with_dims(rng, &dims);
                self.add(
                    Op::Concatenate {
                        dimension: d as i64,
                    },
                    &out,
                    f,
                    &[x, y],
                );
            }
            _ => {
                let y = self.with_dims(rng, &dims);
                let p = self.add(
                    Op::Compare {
                        direction: ComparisonDirection::Gt,
                        comparison_type: None,
                    },
                    &dims,
                    ElementType::Pred,
                    &[x, y],
                );
                let r = self.add(
                    Op::Reverse {
                        dimensions: vec![0],
                    },
                    &dims,
                    f,
                    &[y],
                );
                self.add(Op::Select, &dims, f, &[p, x, r]);
            }
        }
    }
}

fn random_module(seed: u64) -> (Module, Vec<Literal>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut m = Module::new(format!("random{seed}"));
    let mut sum = Computation::new("sum");
    let s = Shape::scalar(ElementType::F32);
    let a = sum.add(Instruction::new("sa", Op::Parameter(0), s.clone()), &[]);
    let b = sum.add(Instruction::new("sb", Op::Parameter(1), s.clone()), &[]);
    sum.add(
        Instruction::new("sr", Op::Binary(BinaryOp::Add), s),
        &[a, b],
    );
    let sum = m.add_computation(sum);
    let mut g = G {
        m,
        vals: Vec::new(),
        n: 0,
        sum,
    };
    let mut args = Vec::new();
    for p in 0..2u32 {
        let dims = rng.dims();
        let n: i64 = dims.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| (rng.below(4001) as f32 - 2000.0) / 1000.0)
            .collect();
        args.push(Literal::Array(Array::f32(&dims, v)));
        g.add(Op::Parameter(p), &dims, ElementType::F32, &[]);
    }
    for _ in 0..3 + rng.below(8) {
        g.step(&mut rng);
    }
    let root = g.vals.last().unwrap().0;
    g.m.entry_mut().set_root(root);
    (g.m, args)
}

#[test]
fn random_graphs_match_the_interpreter() {
    for seed in 1..=150u64 {
        let (m, args) = random_module(seed);
        let want = evaluate(&m, &args).unwrap_or_else(|e| panic!("seed {seed}: interpreter: {e}"));
        for vectorize in [true, false] {
            let exe = compile(
                &m,
                &JitOptions {
                    vectorize,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let got = exe
                .run(&args)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let (g, w) = (got.leaves()[0], want.leaves()[0]);
            assert_eq!(g.shape, w.shape, "seed {seed}");
            for i in 0..w.len() {
                let (a, b) = (g.data.get_f64(i), w.data.get_f64(i));
                let ok = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-4 * (1.0 + b.abs());
                assert!(
                    ok,
                    "seed {seed} vectorize {vectorize} element {i}: jit {a} vs interpreter {b}"
                );
            }
        }
    }
}
