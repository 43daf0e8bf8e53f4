//! Unit tests of the interpreter, one module per op family, on modules built by hand.

mod control_flow;
mod convert;
mod convolution;
mod dot;
mod elementwise;
mod reduce;
mod shape_ops;
mod window;

use super::evaluate;
use crate::ir::{
    Array, ArrayData, ArrayShape, BinaryOp, ComputationId, ElementType, InstrId, Instruction,
    Literal, Module, Op, Shape,
};

/// Builds small modules instruction by instruction with explicit shapes.
pub(super) struct ModuleBuilder {
    pub module: Module,
    comp: ComputationId,
    next: usize,
}

impl ModuleBuilder {
    pub fn new() -> ModuleBuilder {
        ModuleBuilder {
            module: Module::new("test"),
            comp: ComputationId(0),
            next: 0,
        }
    }

    pub fn op(&mut self, op: Op, shape: Shape, operands: &[InstrId]) -> InstrId {
        self.next += 1;
        let name = format!("{}.{}", op.opcode_name(), self.next);
        let comp = self.comp;
        self.module
            .computation_mut(comp)
            .add(Instruction::new(name, op, shape), operands)
    }

    pub fn param(&mut self, n: u32, shape: Shape) -> InstrId {
        self.op(Op::Parameter(n), shape, &[])
    }

    pub fn constant(&mut self, a: Array) -> InstrId {
        let shape = Shape::Array(a.shape.clone());
        self.op(Op::Constant(Literal::Array(a)), shape, &[])
    }

    /// Builds another computation with `f`; the entry stays the current one.
    pub fn computation(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut ModuleBuilder) -> InstrId,
    ) -> ComputationId {
        let id = self
            .module
            .add_computation(crate::ir::Computation::new(name));
        let saved = std::mem::replace(&mut self.comp, id);
        let root = f(self);
        self.module.computation_mut(id).set_root(root);
        self.comp = saved;
        id
    }

    /// `(p0, p1) -> op(p0, p1)` on scalars of `ty`.
    pub(crate) fn binary_computation(&mut self, op: BinaryOp, ty: ElementType) -> ComputationId {
        self.computation(&format!("{}_{ty}", op.name()), |b| {
            let x = b.param(0, Shape::scalar(ty));
            let y = b.param(1, Shape::scalar(ty));
            b.op(Op::Binary(op), Shape::scalar(ty), &[x, y])
        })
    }

    pub fn finish(mut self, root: InstrId) -> Module {
        self.module.entry_mut().set_root(root);
        self.module
    }
}

pub(super) fn run(m: &Module, args: &[Array]) -> Literal {
    let args: Vec<Literal> = args.iter().cloned().map(Literal::Array).collect();
    evaluate(m, &args).unwrap_or_else(|e| panic!("evaluation failed: {e}"))
}

pub(super) fn run_array(m: &Module, args: &[Array]) -> Array {
    run(m, args).into_array().expect("an array result")
}

/// One op applied to parameters of the given arrays' shapes.
pub(super) fn apply(op: Op, out: Shape, args: &[Array]) -> Result<Array, super::EvalError> {
    let mut b = ModuleBuilder::new();
    let ps: Vec<InstrId> = args
        .iter()
        .enumerate()
        .map(|(i, a)| b.param(i as u32, Shape::Array(a.shape.clone())))
        .collect();
    let r = b.op(op, out, &ps);
    let m = b.finish(r);
    let lits: Vec<Literal> = args.iter().cloned().map(Literal::Array).collect();
    evaluate(&m, &lits).map(|l| l.into_array().expect("array"))
}

pub(super) fn f32s(dims: &[i64], v: &[f32]) -> Array {
    Array::f32(dims, v.to_vec())
}

pub(super) fn u32s(dims: &[i64], v: &[u32]) -> Array {
    Array::new(
        ArrayShape::new(ElementType::U32, dims),
        ArrayData::U32(v.to_vec()),
    )
}

pub(super) fn s32s(dims: &[i64], v: &[i32]) -> Array {
    Array::new(
        ArrayShape::new(ElementType::S32, dims),
        ArrayData::S32(v.to_vec()),
    )
}

pub(super) fn as_f32(a: &Array) -> &[f32] {
    match &a.data {
        ArrayData::F32(v) => v,
        other => panic!("expected f32, got {:?}", other.element_type()),
    }
}

/// A deterministic pseudo-random f32 array in [-1, 1).
pub(super) fn pseudo_random(dims: &[i64], seed: u64) -> Array {
    let n: i64 = dims.iter().product();
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let v = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Array::f32(dims, v)
}

pub(super) fn assert_close(actual: &[f32], expected: &[f32]) {
    assert_eq!(actual.len(), expected.len(), "lengths differ");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= 1e-5 + 1e-5 * e.abs(),
            "element {i}: got {a}, expected {e}"
        );
    }
}

/// A value too large to allocate is an error naming the instruction and the bytes, never an
/// abort of the process (`vec!` aborts): a broadcast and a pad with huge interior padding.
#[test]
fn huge_values_are_an_error_not_an_abort() {
    use crate::hlo_text::parse_module;
    let broadcast = "HloModule m\n\nENTRY e {\n  x = f32[] parameter(0)\n  \
         ROOT b = f32[1000000,1000000] broadcast(x), dimensions={}\n}\n";
    let pad = "HloModule m\n\nENTRY e {\n  x = f32[1000000] parameter(0)\n  \
         z = f32[] constant(0)\n  \
         ROOT p = f32[999999000001] pad(x, z), padding=0_0_999999\n}\n";
    let scalar = Literal::Array(Array::new(
        ArrayShape::new(ElementType::F32, &[]),
        ArrayData::F32(vec![1.0]),
    ));
    let vector = Literal::Array(Array::new(
        ArrayShape::new(ElementType::F32, &[1000000]),
        ArrayData::F32(vec![1.0; 1000000]),
    ));
    for (text, arg, name, bytes) in [
        (broadcast, scalar, "b", "4000000000000"),
        (pad, vector, "p", "3999996000004"),
    ] {
        let m = parse_module(text, None).unwrap();
        let e = evaluate(&m, &[arg]).unwrap_err();
        assert_eq!(e.instruction.as_deref(), Some(name), "{e}");
        assert!(e.message.contains(&format!("needs {bytes} bytes")), "{e}");
    }
}
