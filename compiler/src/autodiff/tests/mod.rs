//! Finite-difference checks of every gradient rule.
//!
//! Each test builds a small f32 module whose scalar loss is a weighted sum of the op's result,
//! derives its gradient module with [`grad_module`], and compares the gradients with central
//! finite differences. Both are evaluated by the reference interpreter on an f64 copy of the
//! modules (every f32 type and constant turned into f64), so the differences are accurate to
//! about 1e-9 and the tolerance can be tight. The f32 gradient module is also evaluated, to
//! check that it is a valid module of its own.

mod control;
mod dot_conv;
mod elementwise;
mod errors;
mod shape;
mod traced;
mod window;

use super::emit::Emitter;
use super::grad_module;
use super::scalar_computations::ScalarComputations;
use crate::builder::Builder;
use crate::interpreter::evaluate;
use crate::ir::{
    Array, ArrayData, BinaryOp, Computation, ComputationId, ElementType, InstrId, Literal,
    Metadata, Module, Op, Shape,
};

/// A module under construction: parameters are numbered in the order they are made.
pub(super) struct Case {
    pub module: Module,
    pub scalars: ScalarComputations,
    next_param: u32,
}

impl Case {
    pub fn new() -> Case {
        Case {
            module: Module::new("case"),
            scalars: ScalarComputations::default(),
            next_param: 0,
        }
    }

    /// An emitter on the entry computation.
    pub fn em(&mut self) -> Emitter<'_> {
        let comp = self.module.entry;
        Emitter {
            module: &mut self.module,
            comp,
            metadata: Metadata::default(),
            scalars: &mut self.scalars,
        }
    }

    pub(crate) fn param_of(&mut self, ty: ElementType, dims: &[i64]) -> InstrId {
        let n = self.next_param;
        self.next_param += 1;
        self.em().parameter(n, Shape::array(ty, dims))
    }

    /// An f32 parameter.
    pub fn param(&mut self, dims: &[i64]) -> InstrId {
        self.param_of(ElementType::F32, dims)
    }

    /// Adds an f32 instruction of the given dimensions.
    pub fn op(&mut self, op: Op, dims: &[i64], operands: &[InstrId]) -> InstrId {
        self.em()
            .raw(op, Shape::array(ElementType::F32, dims), operands)
    }

    /// A scalar computation `(a, b) -> op(a, b)` over f32.
    pub(crate) fn binary_computation(&mut self, op: BinaryOp) -> ComputationId {
        let name = self.module.unique_name(&format!("region_{}", op.name()));
        let id = self.module.add_computation(Computation::new(name));
        let mut b = Builder::new(&mut self.module, id);
        let s = Shape::scalar(ElementType::F32);
        let x = b.add_with_shape(Op::Parameter(0), s.clone(), &[]);
        let y = b.add_with_shape(Op::Parameter(1), s.clone(), &[]);
        let r = b.add_with_shape(Op::Binary(op), s, &[x, y]);
        self.module.computation_mut(id).set_root(r);
        id
    }

    /// Finishes the module with loss `sum(out * W)` for fixed weights W in [0.5, 1.5), so
    /// that every element of `out` gets a different cotangent.
    pub fn finish(mut self, out: InstrId) -> Module {
        let mut em = self.em();
        let a = em.array(out).unwrap();
        let n = a.element_count() as usize;
        let w = ArrayData::from_f64_fn(a.element_type, n, |i| {
            0.5 + ((i * 7919 + 13) % 101) as f64 / 101.0
        });
        let weights = em.constant(Literal::Array(Array::new(a.clone(), w)));
        let weighted = em.mul(out, weights).unwrap();
        let loss = em.sum_all(weighted).unwrap();
        self.module.entry_mut().set_root(loss);
        self.module
    }
}

/// A deterministic pseudo-random source (xorshift).
pub(super) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (hi - lo) * ((self.0 >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// Random f32 inputs in `[lo, hi)` for every parameter of the entry (integer parameters get
/// zeros; give them explicitly with [`check_with`] when they matter).
pub(super) fn random_inputs(module: &Module, seed: u64, lo: f64, hi: f64) -> Vec<Literal> {
    let mut rng = Rng::new(seed);
    let (params, _) = module.entry_signature();
    params
        .iter()
        .map(|s| {
            let a = s.as_array().expect("array parameter").clone();
            let n = a.element_count() as usize;
            let data = if a.element_type.is_float() {
                let v: Vec<f64> = (0..n).map(|_| rng.uniform(lo, hi)).collect();
                ArrayData::from_f64_fn(a.element_type, n, |i| v[i])
            } else {
                ArrayData::zeros(a.element_type, n)
            };
            Literal::Array(Array::new(a, data))
        })
        .collect()
}

fn f32_to_f64_shape(shape: &mut Shape) {
    match shape {
        Shape::Array(a) if a.element_type == ElementType::F32 => {
            a.element_type = ElementType::F64;
        }
        Shape::Tuple(parts) => parts.iter_mut().for_each(f32_to_f64_shape),
        _ => {}
    }
}

pub(super) fn f32_to_f64_literal(l: &Literal) -> Literal {
    match l {
        Literal::Array(a) if a.element_type() == ElementType::F32 => {
            let n = a.len();
            let data = ArrayData::from_f64_fn(ElementType::F64, n, |i| a.data.get_f64(i));
            Literal::Array(Array::new(
                a.shape.with_element_type(ElementType::F64),
                data,
            ))
        }
        Literal::Tuple(parts) => Literal::Tuple(parts.iter().map(f32_to_f64_literal).collect()),
        other => other.clone(),
    }
}

/// A copy of `module` computing in f64 wherever it computed in f32.
pub(super) fn to_f64(module: &Module) -> Module {
    let mut m = module.clone();
    for c in m.computations.iter_mut() {
        for id in c.ids().to_vec() {
            let instr = c.get_mut(id);
            f32_to_f64_shape(&mut instr.shape);
            if let Op::Constant(l) = &instr.op {
                instr.op = Op::Constant(f32_to_f64_literal(l));
            }
        }
    }
    m
}

pub(super) fn scalar_of(l: &Literal) -> f64 {
    let a = match l {
        Literal::Tuple(parts) => parts[0].as_array().unwrap(),
        Literal::Array(a) => a,
        Literal::Token => panic!("token result"),
    };
    assert_eq!(a.len(), 1, "loss is not a scalar");
    a.data.get_f64(0)
}

pub(super) fn with_element(l: &Literal, i: usize, delta: f64) -> Literal {
    let a = l.as_array().unwrap();
    let n = a.len();
    let data = ArrayData::from_f64_fn(a.element_type(), n, |j| {
        a.data.get_f64(j) + if j == i { delta } else { 0.0 }
    });
    Literal::Array(Array::new(a.shape.clone(), data))
}

/// Checks the gradients of `module`'s loss w.r.t. parameters `wrt` at `inputs` against
/// central finite differences. Returns the f64 gradients for further checks.
pub(super) fn check_with(module: &Module, wrt: &[u32], inputs: &[Literal]) -> Vec<Array> {
    let grad = grad_module(module, wrt).unwrap_or_else(|e| panic!("grad_module: {e}"));
    if let Err(errors) = crate::verifier::verify(&grad) {
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        panic!("the gradient module does not verify:\n{}", text.join("\n"));
    }
    let grad64 = to_f64(&grad);
    let fwd64 = to_f64(module);
    let args64: Vec<Literal> = inputs.iter().map(f32_to_f64_literal).collect();
    let out = evaluate(&grad64, &args64).unwrap_or_else(|e| panic!("gradient module: {e}"));
    let parts = out.as_tuple().expect("tuple result").to_vec();
    assert_eq!(parts.len(), wrt.len() + 1);
    let value = scalar_of(&evaluate(&fwd64, &args64).unwrap());
    let got_value = parts[0].as_array().unwrap().data.get_f64(0);
    assert!(
        (value - got_value).abs() <= 1e-9 * (1.0 + value.abs()),
        "value {got_value} != forward {value}"
    );
    let mut grads = Vec::new();
    for (k, &w) in wrt.iter().enumerate() {
        let g = parts[k + 1].as_array().unwrap().clone();
        let x = &args64[w as usize];
        assert_eq!(
            g.shape.dims,
            x.as_array().unwrap().shape.dims,
            "gradient shape for parameter {w}"
        );
        if !x.as_array().unwrap().element_type().is_float() {
            grads.push(g);
            continue;
        }
        for i in 0..g.len() {
            let xi = x.as_array().unwrap().data.get_f64(i);
            let h = 1e-5 * xi.abs().max(1.0);
            let mut plus = args64.clone();
            plus[w as usize] = with_element(x, i, h);
            let mut minus = args64.clone();
            minus[w as usize] = with_element(x, i, -h);
            let fp = scalar_of(&evaluate(&fwd64, &plus).unwrap());
            let fm = scalar_of(&evaluate(&fwd64, &minus).unwrap());
            let fd = (fp - fm) / (2.0 * h);
            let a = g.data.get_f64(i);
            assert!(
                (a - fd).abs() <= 1e-6 + 1e-5 * fd.abs(),
                "d loss / d param {w} element {i}: autodiff {a}, finite difference {fd}"
            );
        }
        grads.push(g);
    }
    // The f32 gradient module must run too and agree to f32 accuracy.
    let out32 = evaluate(&grad, inputs).unwrap_or_else(|e| panic!("f32 gradient module: {e}"));
    for (k, part) in out32.as_tuple().unwrap()[1..].iter().enumerate() {
        let a32 = part.as_array().unwrap();
        for i in 0..a32.len() {
            let (x, y) = (a32.data.get_f64(i), grads[k].data.get_f64(i));
            assert!(
                (x - y).abs() <= 1e-3 * (1.0 + y.abs()),
                "f32 gradient {k} element {i}: {x} vs f64 {y}"
            );
        }
    }
    grads
}

/// [`check_with`] on random inputs in `[lo, hi)`, w.r.t. every float parameter.
pub(super) fn check(module: &Module, seed: u64, lo: f64, hi: f64) {
    let inputs = random_inputs(module, seed, lo, hi);
    let (params, _) = module.entry_signature();
    let wrt: Vec<u32> = params
        .iter()
        .enumerate()
        .filter(|(_, s)| s.element_type().is_some_and(|t| t.is_float()))
        .map(|(i, _)| i as u32)
        .collect();
    check_with(module, &wrt, &inputs);
}
