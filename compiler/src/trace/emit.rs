//! The emitter: adds the HLO instructions of one traced op, with its metadata, to the trace.
//!
//! Every tracing op runs as one closure over an [`Emitter`]. The emitter knows the op's
//! source location and name scope; its helpers insert the explicit `broadcast`s that numpy
//! broadcasting needs (HLO has no implicit broadcasting) and check element types, returning
//! a message naming every shape involved when something does not fit.

use super::dims::{array_shape, broadcast_dims, describe, dims_of, Dim};
use super::tracer::{array_shape_of, RegionKind, TraceState};
use crate::ir::Array;
use crate::ir::{
    ArrayData, ArrayShape, BinaryOp, ComparisonDirection, Computation, ComputationId, ElementType,
    InstrId, Instruction, Literal, Metadata, Op, Shape, SourceLocation, UnaryOp,
};

pub(crate) type OpResult = Result<InstrId, String>;

pub(crate) struct Emitter<'s> {
    st: &'s mut TraceState,
    location: SourceLocation,
    /// `scope/composite`: prefix of every `op_name` this op makes.
    prefix: String,
}

impl<'s> Emitter<'s> {
    /// An emitter for one op. `composite` names ops made of several instructions
    /// (`softmax`): their instructions get `op_name` `scope/softmax/exponential`.
    pub(crate) fn new(
        st: &'s mut TraceState,
        location: SourceLocation,
        composite: Option<&str>,
    ) -> Emitter<'s> {
        let mut parts: Vec<String> = st.scopes.clone();
        parts.extend(composite.map(str::to_string));
        Emitter {
            prefix: parts.join("/"),
            st,
            location,
        }
    }

    pub(crate) fn full_shape(&self, id: InstrId) -> Shape {
        let entry = self.st.module.entry;
        self.st.module.computation(entry).get(id).shape.clone()
    }

    pub(crate) fn shape(&self, id: InstrId) -> ArrayShape {
        array_shape_of(self.st, id)
    }

    pub(crate) fn dims(&self, id: InstrId) -> Vec<Dim> {
        dims_of(&self.shape(id))
    }

    pub(crate) fn ty(&self, id: InstrId) -> ElementType {
        self.shape(id).element_type
    }

    pub(crate) fn rank(&self, id: InstrId) -> usize {
        self.shape(id).rank()
    }

    /// `f32[?,784]` for messages.
    pub(crate) fn describe(&self, id: InstrId) -> String {
        describe(&self.shape(id))
    }

    fn metadata(&self, opcode: &str) -> Metadata {
        let op_name = if self.prefix.is_empty() {
            opcode.to_string()
        } else {
            format!("{}/{opcode}", self.prefix)
        };
        Metadata {
            op_name: Some(op_name),
            source: Some(self.location.clone()),
            ..Metadata::default()
        }
    }

    /// Adds an instruction to the entry computation.
    pub(crate) fn emit(&mut self, op: Op, shape: Shape, operands: &[InstrId]) -> InstrId {
        let opcode = op.opcode_name();
        let name = self.st.module.unique_name(opcode);
        let mut instr = Instruction::new(name, op, shape);
        instr.metadata = self.metadata(opcode);
        let entry = self.st.module.entry;
        self.st.module.computation_mut(entry).add(instr, operands)
    }

    pub(crate) fn emit_array(
        &mut self,
        op: Op,
        shape: ArrayShape,
        operands: &[InstrId],
    ) -> InstrId {
        self.emit(op, Shape::Array(shape), operands)
    }

    pub(crate) fn constant_scalar(&mut self, ty: ElementType, value: f64) -> InstrId {
        let data = ArrayData::from_f64_fn(ty, 1, |_| value);
        let array = Array::new(ArrayShape::scalar(ty), data);
        self.emit_array(
            Op::Constant(Literal::Array(array)),
            ArrayShape::scalar(ty),
            &[],
        )
    }

    /// Numpy-style broadcast of `id` to `target` (dimensions aligned at the right). Size-1
    /// dimensions that expand are first reshaped away, since HLO's `broadcast` maps operand
    /// dimensions to output dimensions of the same size.
    pub(crate) fn broadcast_to(&mut self, id: InstrId, target: &[Dim]) -> OpResult {
        let src = self.dims(id);
        if src == target {
            return Ok(id);
        }
        let bad = || {
            format!(
                "cannot broadcast {} to [{}]",
                self.describe(id),
                target
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        if src.len() > target.len() {
            return Err(bad());
        }
        let offset = target.len() - src.len();
        let mut kept_dims = Vec::new();
        let mut mapping = Vec::new();
        for (i, &d) in src.iter().enumerate() {
            let t = target[offset + i];
            match (d, t) {
                (Dim::Fixed(1), t) if t != Dim::Fixed(1) => {}
                (Dim::Fixed(a), Dim::Fixed(b)) if a != b => return Err(bad()),
                (Dim::Unknown, Dim::Fixed(_)) => return Err(bad()),
                _ => {
                    kept_dims.push(d);
                    mapping.push((offset + i) as i64);
                }
            }
        }
        let ty = self.ty(id);
        let operand = if kept_dims.len() == src.len() {
            id
        } else {
            self.emit_array(Op::Reshape, array_shape(ty, &kept_dims), &[id])
        };
        Ok(self.emit_array(
            Op::Broadcast {
                dimensions: mapping,
            },
            array_shape(ty, target),
            &[operand],
        ))
    }

    /// Broadcasts all operands to their common numpy shape.
    fn broadcast_all(&mut self, what: &str, ids: &[InstrId]) -> Result<Vec<InstrId>, String> {
        let mut dims = self.dims(ids[0]);
        for &id in &ids[1..] {
            dims = broadcast_dims(&dims, &self.dims(id)).ok_or_else(|| {
                let shapes: Vec<String> = ids.iter().map(|&i| self.describe(i)).collect();
                format!("{what}: shapes {} do not broadcast", shapes.join(" and "))
            })?;
        }
        ids.iter().map(|&id| self.broadcast_to(id, &dims)).collect()
    }

    fn same_type(&self, what: &str, a: InstrId, b: InstrId) -> Result<ElementType, String> {
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta != tb {
            return Err(format!(
                "{what}: element types differ: {} and {} (cast one of them first)",
                self.describe(a),
                self.describe(b)
            ));
        }
        Ok(ta)
    }

    /// An elementwise binary op with broadcasting; both operands must have the same type.
    pub(crate) fn binary(&mut self, op: BinaryOp, a: InstrId, b: InstrId) -> OpResult {
        let ty = self.same_type(op.name(), a, b)?;
        if op.is_bitwise() && !(ty.is_integer() || ty.is_pred()) {
            return Err(format!(
                "{} needs integer operands, got {} and {}",
                op.name(),
                self.describe(a),
                self.describe(b)
            ));
        }
        let v = self.broadcast_all(op.name(), &[a, b])?;
        let shape = self.shape(v[0]);
        Ok(self.emit_array(Op::Binary(op), shape, &v))
    }

    /// `a OP b` with a scalar constant `b` of `a`'s type.
    pub(crate) fn binary_scalar(&mut self, op: BinaryOp, a: InstrId, b: f64) -> OpResult {
        let c = self.constant_scalar(self.ty(a), b);
        self.binary(op, a, c)
    }

    /// An elementwise comparison (result `pred`) with broadcasting.
    pub(crate) fn compare(
        &mut self,
        direction: ComparisonDirection,
        a: InstrId,
        b: InstrId,
    ) -> OpResult {
        self.same_type("compare", a, b)?;
        let v = self.broadcast_all("compare", &[a, b])?;
        let shape = self.shape(v[0]).with_element_type(ElementType::Pred);
        Ok(self.emit_array(
            Op::Compare {
                direction,
                comparison_type: None,
            },
            shape,
            &v,
        ))
    }

    /// `select(cond, on_true, on_false)` with broadcasting of all three.
    pub(crate) fn select(
        &mut self,
        cond: InstrId,
        on_true: InstrId,
        on_false: InstrId,
    ) -> OpResult {
        if self.ty(cond) != ElementType::Pred {
            return Err(format!(
                "the condition must be pred, got {}",
                self.describe(cond)
            ));
        }
        self.same_type("select", on_true, on_false)?;
        let v = self.broadcast_all("select", &[cond, on_true, on_false])?;
        let shape = self.shape(v[1]);
        Ok(self.emit_array(Op::Select, shape, &v))
    }

    pub(crate) fn unary(&mut self, op: UnaryOp, a: InstrId) -> OpResult {
        let ty = self.ty(a);
        let float_only = !matches!(
            op,
            UnaryOp::Abs
                | UnaryOp::Negate
                | UnaryOp::Sign
                | UnaryOp::Not
                | UnaryOp::PopCnt
                | UnaryOp::Clz
        );
        if float_only && !ty.is_float() {
            return Err(format!(
                "{} needs a floating-point operand, got {} (cast it first)",
                op.name(),
                self.describe(a)
            ));
        }
        let shape = self.shape(a);
        Ok(self.emit_array(Op::Unary(op), shape, &[a]))
    }

    pub(crate) fn convert(&mut self, a: InstrId, ty: ElementType) -> InstrId {
        if self.ty(a) == ty {
            return a;
        }
        let shape = self.shape(a).with_element_type(ty);
        self.emit_array(Op::Convert, shape, &[a])
    }

    /// A `reshape` to `dims`; the caller has checked the element count.
    pub(crate) fn reshape_to(&mut self, a: InstrId, dims: &[Dim]) -> InstrId {
        if self.dims(a) == dims {
            return a;
        }
        let shape = array_shape(self.ty(a), dims);
        self.emit_array(Op::Reshape, shape, &[a])
    }

    /// Reduces dimensions `axes` (sorted, distinct, in range) with a sum or max.
    pub(crate) fn reduce(&mut self, a: InstrId, axes: &[usize], kind: RegionKind) -> InstrId {
        let ty = self.ty(a);
        let init = match kind {
            RegionKind::Sum => self.constant_scalar(ty, 0.0),
            _ => self.lowest(ty),
        };
        let region = self.region(kind, ty);
        let dims: Vec<Dim> = self
            .dims(a)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, d)| d)
            .collect();
        self.emit_array(
            Op::Reduce {
                dimensions: axes.iter().map(|&x| x as i64).collect(),
                to_apply: region,
            },
            array_shape(ty, &dims),
            &[a, init],
        )
    }

    /// The identity of `max` for `ty`: -inf for floats, the smallest value for integers.
    pub(crate) fn lowest(&mut self, ty: ElementType) -> InstrId {
        let value = if ty.is_float() {
            f64::NEG_INFINITY
        } else if ty.is_signed_int() {
            -(2f64.powi(ty.bit_width() as i32 - 1))
        } else {
            0.0
        };
        self.constant_scalar(ty, value)
    }

    pub(crate) fn iota(&mut self, ty: ElementType, dims: &[Dim], dimension: usize) -> InstrId {
        self.emit_array(
            Op::Iota {
                dimension: dimension as i64,
            },
            array_shape(ty, dims),
            &[],
        )
    }

    /// The reduction region `kind` over `ty`, made once per trace.
    pub(crate) fn region(&mut self, kind: RegionKind, ty: ElementType) -> ComputationId {
        if let Some(&c) = self.st.regions.get(&(kind, ty)) {
            return c;
        }
        let comp = build_region(&mut self.st.module, kind, ty);
        let id = self.st.module.add_computation(comp);
        self.st.regions.insert((kind, ty), id);
        id
    }
}

/// Builds a reduction region computation.
fn build_region(module: &mut crate::ir::Module, kind: RegionKind, ty: ElementType) -> Computation {
    let scalar = |t: ElementType| Shape::scalar(t);
    let base = match kind {
        RegionKind::Sum => format!("sum_{ty}"),
        RegionKind::Max => format!("max_{ty}"),
        RegionKind::ArgMax(index) => format!("argmax_{ty}_{index}"),
    };
    let mut comp = Computation::new(module.unique_name(&base));
    let add = |module: &mut crate::ir::Module,
               comp: &mut Computation,
               op: Op,
               shape: Shape,
               operands: &[InstrId]| {
        let name = module.unique_name(op.opcode_name());
        comp.add(Instruction::new(name, op, shape), operands)
    };
    match kind {
        RegionKind::Sum | RegionKind::Max => {
            let x = add(module, &mut comp, Op::Parameter(0), scalar(ty), &[]);
            let y = add(module, &mut comp, Op::Parameter(1), scalar(ty), &[]);
            let op = if kind == RegionKind::Sum {
                BinaryOp::Add
            } else {
                BinaryOp::Maximum
            };
            let r = add(module, &mut comp, Op::Binary(op), scalar(ty), &[x, y]);
            comp.set_root(r);
        }
        RegionKind::ArgMax(index) => {
            let v1 = add(module, &mut comp, Op::Parameter(0), scalar(ty), &[]);
            let i1 = add(module, &mut comp, Op::Parameter(1), scalar(index), &[]);
            let v2 = add(module, &mut comp, Op::Parameter(2), scalar(ty), &[]);
            let i2 = add(module, &mut comp, Op::Parameter(3), scalar(index), &[]);
            let cmp = |direction| Op::Compare {
                direction,
                comparison_type: None,
            };
            let pred = scalar(ElementType::Pred);
            let gt = add(
                module,
                &mut comp,
                cmp(ComparisonDirection::Gt),
                pred.clone(),
                &[v1, v2],
            );
            let eq = add(
                module,
                &mut comp,
                cmp(ComparisonDirection::Eq),
                pred.clone(),
                &[v1, v2],
            );
            let lt = add(
                module,
                &mut comp,
                cmp(ComparisonDirection::Lt),
                pred.clone(),
                &[i1, i2],
            );
            let tie = add(
                module,
                &mut comp,
                Op::Binary(BinaryOp::And),
                pred.clone(),
                &[eq, lt],
            );
            let take_first = add(
                module,
                &mut comp,
                Op::Binary(BinaryOp::Or),
                pred,
                &[gt, tie],
            );
            let v = add(
                module,
                &mut comp,
                Op::Select,
                scalar(ty),
                &[take_first, v1, v2],
            );
            let i = add(
                module,
                &mut comp,
                Op::Select,
                scalar(index),
                &[take_first, i1, i2],
            );
            let t = add(
                module,
                &mut comp,
                Op::Tuple,
                Shape::Tuple(vec![scalar(ty), scalar(index)]),
                &[v, i],
            );
            comp.set_root(t);
        }
    }
    comp
}
