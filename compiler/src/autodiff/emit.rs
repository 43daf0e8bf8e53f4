//! Adding the instructions of gradient rules, each with a shape computed here.
//!
//! Every gradient rule builds its instructions through an [`Emitter`]. The emitter works out
//! each result shape from its operands itself (the rules know exactly what they build), so
//! autodiff does not depend on general shape inference, and a malformed input module gives an
//! [`AutodiffError`] instead of a panic.

use super::scalar_computations::{ScalarComputations, ScalarKind};
use super::AutodiffError;
use crate::builder::Builder;
use crate::ir::{
    Array, ArrayData, ArrayShape, BinaryOp, ComparisonDirection, ComputationId, Convolution,
    DotDimensionNumbers, ElementType, GatherDimensionNumbers, InstrId, Instruction, Literal,
    Metadata, Module, Op, PadDim, ScatterDimensionNumbers, Shape, SliceDim, UnaryOp, Window,
};

pub(crate) type R<T> = Result<T, AutodiffError>;

/// Adds instructions to one computation; `metadata` goes on every instruction added.
pub(crate) struct Emitter<'a> {
    pub module: &'a mut Module,
    pub comp: ComputationId,
    pub metadata: Metadata,
    pub scalars: &'a mut ScalarComputations,
}

fn err<T>(message: impl Into<String>) -> R<T> {
    Err(AutodiffError::new(message))
}

impl<'a> Emitter<'a> {
    /// An emitter for another computation of the same module (loop bodies, conditions).
    pub(crate) fn for_computation(&mut self, comp: ComputationId) -> Emitter<'_> {
        Emitter {
            module: self.module,
            comp,
            metadata: self.metadata.clone(),
            scalars: self.scalars,
        }
    }

    pub(crate) fn shape(&self, id: InstrId) -> &Shape {
        &self.module.computation(self.comp).get(id).shape
    }

    /// The array shape of `id`, or an error naming it.
    pub(crate) fn array(&self, id: InstrId) -> R<ArrayShape> {
        let instr = self.module.computation(self.comp).get(id);
        match &instr.shape {
            Shape::Array(a) => Ok(a.clone()),
            other => err(format!(
                "{} has shape {} where an array was expected",
                instr.name, other
            )),
        }
    }

    pub(crate) fn element_type(&self, id: InstrId) -> R<ElementType> {
        Ok(self.array(id)?.element_type)
    }

    pub(crate) fn dims(&self, id: InstrId) -> R<Vec<i64>> {
        Ok(self.array(id)?.dims.to_vec())
    }

    /// Adds `op` with a shape this module computed.
    pub(crate) fn raw(&mut self, op: Op, shape: Shape, operands: &[InstrId]) -> InstrId {
        let mut b = Builder::new(self.module, self.comp);
        b.metadata = self.metadata.clone();
        b.add_with_shape(op, shape, operands)
    }

    /// Gives `to` the uninterpreted attribute `key` of `from`, if `from` has it (e.g. XLA's
    /// `operand_precision`, which the gradient convolutions of a convolution keep, as JAX's
    /// transpose rules do).
    pub(crate) fn copy_attr(&mut self, from: &Instruction, key: &str, to: InstrId) {
        if let Some(attr) = from.extra_attrs.iter().find(|(k, _)| k == key) {
            let instr = self.module.computation_mut(self.comp).get_mut(to);
            instr.extra_attrs.retain(|(k, _)| k != key);
            instr.extra_attrs.push(attr.clone());
        }
    }

    pub(crate) fn parameter(&mut self, number: u32, shape: Shape) -> InstrId {
        self.raw(Op::Parameter(number), shape, &[])
    }

    pub(crate) fn constant(&mut self, literal: Literal) -> InstrId {
        let shape = literal.shape();
        self.raw(Op::Constant(literal), shape, &[])
    }

    /// A scalar constant of type `ty` holding `value`.
    pub(crate) fn scalar(&mut self, ty: ElementType, value: f64) -> InstrId {
        let data = ArrayData::from_f64_fn(ty, 1, |_| value);
        self.constant(Literal::Array(Array::new(ArrayShape::scalar(ty), data)))
    }

    /// `value` broadcast to `shape`.
    pub(crate) fn full(&mut self, shape: &ArrayShape, value: f64) -> InstrId {
        let s = self.scalar(shape.element_type, value);
        if shape.rank() == 0 {
            return s;
        }
        self.raw(
            Op::Broadcast { dimensions: vec![] },
            Shape::Array(ArrayShape::new(shape.element_type, &shape.dims)),
            &[s],
        )
    }

    /// Zeros of an array or tuple shape.
    pub(crate) fn zeros(&mut self, shape: &Shape) -> R<InstrId> {
        match shape {
            Shape::Array(a) => Ok(self.full(a, 0.0)),
            Shape::Tuple(elems) => {
                let parts = elems.iter().map(|e| self.zeros(e)).collect::<R<Vec<_>>>()?;
                Ok(self.tuple(&parts))
            }
            Shape::Token => err("a token value has no zero"),
        }
    }

    /// A value like `like` (same shape and type) filled with `value`.
    pub(crate) fn full_like(&mut self, like: InstrId, value: f64) -> R<InstrId> {
        let a = self.array(like)?;
        Ok(self.full(&a, value))
    }

    pub(crate) fn unary(&mut self, op: UnaryOp, x: InstrId) -> R<InstrId> {
        let a = self.array(x)?;
        Ok(self.raw(Op::Unary(op), Shape::Array(a), &[x]))
    }

    /// An elementwise binary op; a scalar operand is broadcast to the other's shape.
    pub(crate) fn binary(&mut self, op: BinaryOp, a: InstrId, b: InstrId) -> R<InstrId> {
        let (a, b) = self.match_shapes(a, b)?;
        let sa = self.array(a)?;
        let sb = self.array(b)?;
        if sa.dims != sb.dims || sa.element_type != sb.element_type {
            return err(format!("{} of {} and {}", op.name(), sa, sb));
        }
        Ok(self.raw(Op::Binary(op), Shape::Array(sa), &[a, b]))
    }

    /// Broadcasts a scalar operand to the other operand's dimensions.
    fn match_shapes(&mut self, a: InstrId, b: InstrId) -> R<(InstrId, InstrId)> {
        let sa = self.array(a)?;
        let sb = self.array(b)?;
        if sa.rank() == 0 && sb.rank() > 0 {
            Ok((self.broadcast(a, &sb.dims, &[])?, b))
        } else if sb.rank() == 0 && sa.rank() > 0 {
            Ok((a, self.broadcast(b, &sa.dims, &[])?))
        } else {
            Ok((a, b))
        }
    }

    pub(crate) fn add(&mut self, a: InstrId, b: InstrId) -> R<InstrId> {
        self.binary(BinaryOp::Add, a, b)
    }

    pub(crate) fn sub(&mut self, a: InstrId, b: InstrId) -> R<InstrId> {
        self.binary(BinaryOp::Subtract, a, b)
    }

    pub(crate) fn mul(&mut self, a: InstrId, b: InstrId) -> R<InstrId> {
        self.binary(BinaryOp::Multiply, a, b)
    }

    pub(crate) fn div(&mut self, a: InstrId, b: InstrId) -> R<InstrId> {
        self.binary(BinaryOp::Divide, a, b)
    }

    pub(crate) fn neg(&mut self, a: InstrId) -> R<InstrId> {
        self.unary(UnaryOp::Negate, a)
    }

    /// `x * c` for a constant `c` of x's type.
    pub(crate) fn mul_const(&mut self, x: InstrId, c: f64) -> R<InstrId> {
        let ty = self.element_type(x)?;
        let k = self.scalar(ty, c);
        self.mul(x, k)
    }

    /// `x + c` for a constant `c` of x's type.
    pub(crate) fn add_const(&mut self, x: InstrId, c: f64) -> R<InstrId> {
        let ty = self.element_type(x)?;
        let k = self.scalar(ty, c);
        self.add(x, k)
    }

    pub(crate) fn compare(
        &mut self,
        direction: ComparisonDirection,
        a: InstrId,
        b: InstrId,
    ) -> R<InstrId> {
        let (a, b) = self.match_shapes(a, b)?;
        let sa = self.array(a)?;
        let sb = self.array(b)?;
        if sa.dims != sb.dims {
            return err(format!("compare of {} and {}", sa, sb));
        }
        Ok(self.raw(
            Op::Compare {
                direction,
                comparison_type: None,
            },
            Shape::Array(sa.with_element_type(ElementType::Pred)),
            &[a, b],
        ))
    }

    /// `select(p, a, b)`; a scalar `a` or `b` is broadcast, a scalar `p` too.
    pub(crate) fn select(&mut self, p: InstrId, a: InstrId, b: InstrId) -> R<InstrId> {
        let (a, b) = self.match_shapes(a, b)?;
        let sa = self.array(a)?;
        let sp = self.array(p)?;
        let p = if sp.rank() == 0 && sa.rank() > 0 {
            self.broadcast(p, &sa.dims, &[])?
        } else {
            p
        };
        Ok(self.raw(Op::Select, Shape::Array(sa), &[p, a, b]))
    }

    pub(crate) fn and(&mut self, a: InstrId, b: InstrId) -> R<InstrId> {
        self.binary(BinaryOp::And, a, b)
    }

    pub(crate) fn convert(&mut self, x: InstrId, ty: ElementType) -> R<InstrId> {
        let a = self.array(x)?;
        if a.element_type == ty {
            return Ok(x);
        }
        Ok(self.raw(Op::Convert, Shape::Array(a.with_element_type(ty)), &[x]))
    }

    /// `broadcast(x), dimensions=dims` to `out_dims`.
    pub(crate) fn broadcast(&mut self, x: InstrId, out_dims: &[i64], dims: &[i64]) -> R<InstrId> {
        let a = self.array(x)?;
        if dims.len() != a.rank() || dims.iter().any(|&d| d < 0 || d as usize >= out_dims.len()) {
            return err(format!(
                "broadcast of {} to {:?} with dimensions {:?}",
                a, out_dims, dims
            ));
        }
        Ok(self.raw(
            Op::Broadcast {
                dimensions: dims.to_vec(),
            },
            Shape::Array(ArrayShape::new(a.element_type, out_dims)),
            &[x],
        ))
    }

    pub(crate) fn reshape(&mut self, x: InstrId, dims: &[i64]) -> R<InstrId> {
        let a = self.array(x)?;
        if &a.dims[..] == dims {
            return Ok(x);
        }
        let count: i64 = dims.iter().product();
        if count != a.element_count() {
            return err(format!("reshape of {} to {:?}", a, dims));
        }
        Ok(self.raw(
            Op::Reshape,
            Shape::Array(ArrayShape::new(a.element_type, dims)),
            &[x],
        ))
    }

    /// `transpose(x), dimensions=perm`: result dimension i is operand dimension perm[i].
    pub(crate) fn transpose(&mut self, x: InstrId, perm: &[i64]) -> R<InstrId> {
        let a = self.array(x)?;
        if perm.iter().enumerate().all(|(i, &p)| i as i64 == p) {
            return Ok(x);
        }
        let mut seen = vec![false; a.rank()];
        for &p in perm {
            if p < 0 || p as usize >= a.rank() || seen[p as usize] {
                return err(format!("transpose of {} by {:?}", a, perm));
            }
            seen[p as usize] = true;
        }
        if perm.len() != a.rank() {
            return err(format!("transpose of {} by {:?}", a, perm));
        }
        let dims: Vec<i64> = perm.iter().map(|&p| a.dims[p as usize]).collect();
        Ok(self.raw(
            Op::Transpose {
                permutation: perm.to_vec(),
            },
            Shape::Array(ArrayShape::new(a.element_type, &dims)),
            &[x],
        ))
    }

    pub(crate) fn reverse(&mut self, x: InstrId, dimensions: &[i64]) -> R<InstrId> {
        if dimensions.is_empty() {
            return Ok(x);
        }
        let a = self.array(x)?;
        Ok(self.raw(
            Op::Reverse {
                dimensions: dimensions.to_vec(),
            },
            Shape::Array(a),
            &[x],
        ))
    }

    pub(crate) fn slice(&mut self, x: InstrId, dims: &[SliceDim]) -> R<InstrId> {
        let a = self.array(x)?;
        if dims.len() != a.rank() {
            return err(format!("slice of {} with {} dimensions", a, dims.len()));
        }
        let mut out = Vec::with_capacity(dims.len());
        for (d, s) in dims.iter().enumerate() {
            if s.start < 0 || s.limit > a.dims[d] || s.start > s.limit || s.stride < 1 {
                return err(format!(
                    "slice [{}:{}:{}] of dimension {} of {}",
                    s.start, s.limit, s.stride, d, a
                ));
            }
            out.push((s.limit - s.start + s.stride - 1) / s.stride);
        }
        if out[..] == a.dims[..] {
            return Ok(x);
        }
        Ok(self.raw(
            Op::Slice {
                dims: dims.to_vec(),
            },
            Shape::Array(ArrayShape::new(a.element_type, &out)),
            &[x],
        ))
    }

    /// `x[start:start+len]` along `dim`.
    pub(crate) fn slice_in_dim(
        &mut self,
        x: InstrId,
        dim: usize,
        start: i64,
        len: i64,
    ) -> R<InstrId> {
        let a = self.array(x)?;
        let dims: Vec<SliceDim> = (0..a.rank())
            .map(|d| {
                if d == dim {
                    SliceDim {
                        start,
                        limit: start + len,
                        stride: 1,
                    }
                } else {
                    SliceDim {
                        start: 0,
                        limit: a.dims[d],
                        stride: 1,
                    }
                }
            })
            .collect();
        self.slice(x, &dims)
    }

    /// `pad(x, value)` with non-negative edge padding.
    pub(crate) fn pad(&mut self, x: InstrId, value: InstrId, dims: &[PadDim]) -> R<InstrId> {
        let a = self.array(x)?;
        if dims.len() != a.rank() {
            return err(format!("pad of {} with {} dimensions", a, dims.len()));
        }
        if dims
            .iter()
            .all(|p| p.low == 0 && p.high == 0 && p.interior == 0)
        {
            return Ok(x);
        }
        let out: Vec<i64> = a
            .dims
            .iter()
            .zip(dims)
            .map(|(&n, p)| p.low + p.high + n + (n - 1).max(0) * p.interior)
            .collect();
        if out.iter().any(|&n| n < 0) {
            return err(format!("pad of {} to negative size {:?}", a, out));
        }
        Ok(self.raw(
            Op::Pad {
                dims: dims.to_vec(),
            },
            Shape::Array(ArrayShape::new(a.element_type, &out)),
            &[x, value],
        ))
    }

    /// Pads with zeros where `low`/`high` are positive and crops where they are negative,
    /// emitting only non-negative pads and slices (backends need not support negative pads).
    pub(crate) fn pad_zeros_or_crop(
        &mut self,
        x: InstrId,
        low: &[i64],
        high: &[i64],
        interior: &[i64],
    ) -> R<InstrId> {
        let ty = self.element_type(x)?;
        let zero = self.scalar(ty, 0.0);
        let pads: Vec<PadDim> = (0..low.len())
            .map(|d| PadDim {
                low: low[d].max(0),
                high: high[d].max(0),
                interior: interior[d],
            })
            .collect();
        let padded = self.pad(x, zero, &pads)?;
        let pa = self.array(padded)?;
        let slices: Vec<SliceDim> = (0..low.len())
            .map(|d| SliceDim {
                start: (-low[d]).max(0),
                limit: pa.dims[d] - (-high[d]).max(0),
                stride: 1,
            })
            .collect();
        self.slice(padded, &slices)
    }

    pub(crate) fn dynamic_slice(
        &mut self,
        x: InstrId,
        starts: &[InstrId],
        sizes: &[i64],
    ) -> R<InstrId> {
        let a = self.array(x)?;
        let mut operands = vec![x];
        operands.extend_from_slice(starts);
        Ok(self.raw(
            Op::DynamicSlice {
                sizes: sizes.to_vec(),
            },
            Shape::Array(ArrayShape::new(a.element_type, sizes)),
            &operands,
        ))
    }

    pub(crate) fn dynamic_update_slice(
        &mut self,
        x: InstrId,
        update: InstrId,
        starts: &[InstrId],
    ) -> R<InstrId> {
        let a = self.array(x)?;
        let mut operands = vec![x, update];
        operands.extend_from_slice(starts);
        Ok(self.raw(Op::DynamicUpdateSlice, Shape::Array(a), &operands))
    }

    /// Sum of `x` over `dims` (an empty list returns `x`).
    pub(crate) fn reduce_sum(&mut self, x: InstrId, dims: &[i64]) -> R<InstrId> {
        if dims.is_empty() {
            return Ok(x);
        }
        let a = self.array(x)?;
        let to_apply = self
            .scalars
            .get(self.module, ScalarKind::Add, a.element_type);
        let zero = self.scalar(a.element_type, 0.0);
        let out: Vec<i64> = (0..a.rank() as i64)
            .filter(|d| !dims.contains(d))
            .map(|d| a.dims[d as usize])
            .collect();
        let mut sorted = dims.to_vec();
        sorted.sort_unstable();
        Ok(self.raw(
            Op::Reduce {
                dimensions: sorted,
                to_apply,
            },
            Shape::Array(ArrayShape::new(a.element_type, &out)),
            &[x, zero],
        ))
    }

    /// Sum of all elements.
    pub(crate) fn sum_all(&mut self, x: InstrId) -> R<InstrId> {
        let rank = self.array(x)?.rank() as i64;
        let dims: Vec<i64> = (0..rank).collect();
        self.reduce_sum(x, &dims)
    }

    pub(crate) fn dot(&mut self, a: InstrId, b: InstrId, dn: DotDimensionNumbers) -> R<InstrId> {
        let sa = self.array(a)?;
        let sb = self.array(b)?;
        let mut out: Vec<i64> = dn.lhs_batch.iter().map(|&d| sa.dims[d as usize]).collect();
        for d in 0..sa.rank() as i64 {
            if !dn.lhs_batch.contains(&d) && !dn.lhs_contracting.contains(&d) {
                out.push(sa.dims[d as usize]);
            }
        }
        for d in 0..sb.rank() as i64 {
            if !dn.rhs_batch.contains(&d) && !dn.rhs_contracting.contains(&d) {
                out.push(sb.dims[d as usize]);
            }
        }
        for (l, r) in dn.lhs_contracting.iter().zip(&dn.rhs_contracting) {
            if sa.dims[*l as usize] != sb.dims[*r as usize] {
                return err(format!("dot of {} and {} contracting {:?}", sa, sb, dn));
            }
        }
        Ok(self.raw(
            Op::Dot(dn),
            Shape::Array(ArrayShape::new(sa.element_type, &out)),
            &[a, b],
        ))
    }

    pub(crate) fn convolution(
        &mut self,
        lhs: InstrId,
        rhs: InstrId,
        conv: Convolution,
    ) -> R<InstrId> {
        let sl = self.array(lhs)?;
        let sr = self.array(rhs)?;
        let d = &conv.dims;
        let mut out = vec![0i64; sl.rank()];
        out[d.output_batch as usize] = sl.dims[d.input_batch as usize] / conv.batch_group_count;
        out[d.output_feature as usize] = sr.dims[d.kernel_output_feature as usize];
        for (i, w) in conv.window.dims.iter().enumerate() {
            let n = sl.dims[d.input_spatial[i] as usize];
            let k = sr.dims[d.kernel_spatial[i] as usize];
            if k != w.size {
                return err(format!(
                    "convolution window size {} but kernel spatial size {}",
                    w.size, k
                ));
            }
            out[d.output_spatial[i] as usize] = window_output_size(n, w);
        }
        Ok(self.raw(
            Op::Convolution(conv),
            Shape::Array(ArrayShape::new(sl.element_type, &out)),
            &[lhs, rhs],
        ))
    }

    pub(crate) fn select_and_scatter(
        &mut self,
        operand: InstrId,
        source: InstrId,
        init: InstrId,
        window: Window,
        select: ComputationId,
        scatter: ComputationId,
    ) -> R<InstrId> {
        let a = self.array(operand)?;
        Ok(self.raw(
            Op::SelectAndScatter {
                window,
                select,
                scatter,
            },
            Shape::Array(a),
            &[operand, source, init],
        ))
    }

    /// `gather(x, indices)`; its shape from shape inference.
    pub(crate) fn gather(
        &mut self,
        x: InstrId,
        indices: InstrId,
        dims: GatherDimensionNumbers,
        slice_sizes: Vec<i64>,
        indices_are_sorted: bool,
    ) -> R<InstrId> {
        let op = Op::Gather {
            dims,
            slice_sizes,
            indices_are_sorted,
        };
        self.inferred(op, &[x, indices])
    }

    /// `scatter(x, indices, updates)` adding the updates in.
    pub(crate) fn scatter_add(
        &mut self,
        x: InstrId,
        indices: InstrId,
        updates: InstrId,
        dims: ScatterDimensionNumbers,
        indices_are_sorted: bool,
    ) -> R<InstrId> {
        let ty = self.element_type(x)?;
        let to_apply = self.scalars.get(self.module, ScalarKind::Add, ty);
        let op = Op::Scatter {
            dims,
            to_apply,
            indices_are_sorted,
            unique_indices: false,
        };
        self.inferred(op, &[x, indices, updates])
    }

    /// Adds `op` with the shape shape inference gives (for ops whose shape rules are long).
    fn inferred(&mut self, op: Op, operands: &[InstrId]) -> R<InstrId> {
        let shapes: Vec<Shape> = operands.iter().map(|&o| self.shape(o).clone()).collect();
        let refs: Vec<&Shape> = shapes.iter().collect();
        let shape = crate::shape_inference::infer_shape(self.module, &op, &refs)
            .map_err(|e| AutodiffError::new(e.message))?;
        Ok(self.raw(op, shape, operands))
    }

    /// `reduce-window` summing `x`.
    pub(crate) fn reduce_window_sum(&mut self, x: InstrId, window: Window) -> R<InstrId> {
        let a = self.array(x)?;
        let to_apply = self
            .scalars
            .get(self.module, ScalarKind::Add, a.element_type);
        let zero = self.scalar(a.element_type, 0.0);
        let out: Vec<i64> = a
            .dims
            .iter()
            .zip(&window.dims)
            .map(|(&n, w)| window_output_size(n, w))
            .collect();
        Ok(self.raw(
            Op::ReduceWindow { window, to_apply },
            Shape::Array(ArrayShape::new(a.element_type, &out)),
            &[x, zero],
        ))
    }

    pub(crate) fn tuple(&mut self, parts: &[InstrId]) -> InstrId {
        let shapes = parts.iter().map(|&p| self.shape(p).clone()).collect();
        self.raw(Op::Tuple, Shape::Tuple(shapes), parts)
    }

    pub(crate) fn gte(&mut self, t: InstrId, index: usize) -> R<InstrId> {
        let shape = match self.shape(t) {
            Shape::Tuple(elems) if index < elems.len() => elems[index].clone(),
            other => {
                return err(format!(
                    "get-tuple-element {} of a value of shape {}",
                    index, other
                ))
            }
        };
        Ok(self.raw(
            Op::GetTupleElement {
                index: index as i64,
            },
            shape,
            &[t],
        ))
    }

    pub(crate) fn while_loop(
        &mut self,
        init: InstrId,
        condition: ComputationId,
        body: ComputationId,
    ) -> InstrId {
        let shape = self.shape(init).clone();
        self.raw(Op::While { condition, body }, shape, &[init])
    }
}

/// Output size of one window dimension over an input of size `n` (reduce-window, convolution).
pub(crate) fn window_output_size(n: i64, w: &crate::ir::WindowDim) -> i64 {
    let padded = if n == 0 {
        0
    } else {
        (n - 1) * w.base_dilation + 1
    } + w.pad_low
        + w.pad_high;
    let extent = (w.size - 1) * w.window_dilation + 1;
    if padded < extent {
        0
    } else {
        (padded - extent) / w.stride + 1
    }
}
