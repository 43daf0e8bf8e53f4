//! The symbolic tensor handle and Rust's arithmetic operators on it.

use super::dims::{dims_of, Dim};
use super::emit::{Emitter, OpResult};
use super::tracer::{array_shape_of, source_location, TraceState};
use crate::ir::{ArrayShape, BinaryOp, ElementType, InstrId, UnaryOp};
use std::cell::RefCell;
use std::fmt;
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::panic::Location;
use std::rc::Rc;

/// A value of a trace: a cheap handle to an instruction of the module being recorded.
///
/// A tensor made by an op that failed (a shape mistake) is *failed*: it has no instruction,
/// ops on it make failed tensors without further errors, and [`super::Tracer::finish`]
/// reports the first mistake with its source line.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) state: Rc<RefCell<TraceState>>,
    pub(crate) id: Option<InstrId>,
}

impl Tensor {
    pub(crate) fn new(state: &Rc<RefCell<TraceState>>, id: InstrId) -> Tensor {
        Tensor {
            state: Rc::clone(state),
            id: Some(id),
        }
    }

    pub(crate) fn failed(state: &Rc<RefCell<TraceState>>) -> Tensor {
        Tensor {
            state: Rc::clone(state),
            id: None,
        }
    }

    /// The instruction in the entry computation, or `None` for a failed tensor.
    pub fn id(&self) -> Option<InstrId> {
        self.id
    }

    /// False when the op that made this tensor failed.
    pub fn is_ok(&self) -> bool {
        self.id.is_some()
    }

    /// The IR shape (unknown dimensions are dynamic), `None` for a failed tensor.
    pub fn shape(&self) -> Option<ArrayShape> {
        self.id.map(|id| array_shape_of(&self.state.borrow(), id))
    }

    /// The dimensions; empty for a failed tensor.
    pub fn dims(&self) -> Vec<Dim> {
        self.shape().map(|s| dims_of(&s)).unwrap_or_default()
    }

    pub fn rank(&self) -> usize {
        self.dims().len()
    }

    pub fn element_type(&self) -> Option<ElementType> {
        self.shape().map(|s| s.element_type)
    }

    /// A failed tensor of this tensor's trace, recording `message` as an error of `op` at the
    /// caller's line: for library code (layers, losses, the estimator's `features["x"]`) that
    /// checks its own arguments and reports a mistake as ops do, in `Tracer::finish`'s list.
    #[track_caller]
    pub fn fail(&self, op: &str, message: impl Into<String>) -> Tensor {
        let loc = source_location(Location::caller());
        self.state.borrow_mut().record(op, message.into(), loc);
        Tensor::failed(&self.state)
    }

    /// Runs one traced op: `f` gets an emitter and the operands' instructions. Operands from
    /// another trace, failed operands and errors returned by `f` give a failed tensor; only
    /// errors that start here are recorded. `composite` ops name their instructions
    /// `scope/op/opcode`, single-instruction ops `scope/opcode`.
    pub(crate) fn op(
        name: &str,
        composite: bool,
        loc: &'static Location<'static>,
        inputs: &[&Tensor],
        f: impl FnOnce(&mut Emitter, &[InstrId]) -> OpResult,
    ) -> Tensor {
        let state = &inputs[0].state;
        if let Some(other) = inputs.iter().position(|t| !Rc::ptr_eq(&t.state, state)) {
            let msg = format!("operand {other} belongs to a different tracer than operand 0");
            state.borrow_mut().record(name, msg, source_location(loc));
            return Tensor::failed(state);
        }
        let ids: Option<Vec<InstrId>> = inputs.iter().map(|t| t.id).collect();
        let mut st = state.borrow_mut();
        let Some(ids) = ids else {
            return Tensor::failed(state);
        };
        if st.finished {
            let msg = "the trace has already finished".to_string();
            st.record(name, msg, source_location(loc));
            return Tensor::failed(state);
        }
        let mut cx = Emitter::new(&mut st, source_location(loc), composite.then_some(name));
        let result = f(&mut cx, &ids).and_then(|id| match cx.inconsistency.take() {
            Some(msg) => Err(msg),
            None => Ok(id),
        });
        match result {
            Ok(id) => Tensor::new(state, id),
            Err(msg) => {
                // Helpers prefix messages with the HLO op; drop it when it repeats `name`.
                let msg = match msg.strip_prefix(name).and_then(|m| m.strip_prefix(": ")) {
                    Some(rest) => rest.to_string(),
                    None => msg,
                };
                st.record(name, msg, source_location(loc));
                Tensor::failed(state)
            }
        }
    }

    /// An elementwise binary op with numpy broadcasting.
    #[track_caller]
    pub(crate) fn binary_op(&self, op: BinaryOp, rhs: &Tensor) -> Tensor {
        Tensor::op(
            op.name(),
            false,
            Location::caller(),
            &[self, rhs],
            |cx, v| cx.binary(op, v[0], v[1]),
        )
    }

    /// `self OP scalar` (or `scalar OP self` when `scalar_first`), the scalar converted to
    /// this tensor's element type.
    #[track_caller]
    pub(crate) fn scalar_op(&self, op: BinaryOp, scalar: f64, scalar_first: bool) -> Tensor {
        Tensor::op(op.name(), false, Location::caller(), &[self], |cx, v| {
            let c = cx.constant_scalar(cx.ty(v[0]), scalar);
            if scalar_first {
                cx.binary(op, c, v[0])
            } else {
                cx.binary(op, v[0], c)
            }
        })
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.id {
            None => f.write_str("Tensor(failed)"),
            Some(id) => {
                let st = self.state.borrow();
                let entry = st.module.entry;
                let instr = st.module.computation(entry).get(id);
                write!(f, "Tensor({} : {})", instr.name, instr.shape.to_text(false))
            }
        }
    }
}

/// `a + b`, `a - b`, `a * b`, `a / b` for every mix of `Tensor`, `&Tensor` and `f32`.
macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary_op($op, rhs)
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary_op($op, &rhs)
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary_op($op, rhs)
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary_op($op, &rhs)
            }
        }
        impl $trait<f32> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: f32) -> Tensor {
                self.scalar_op($op, rhs as f64, false)
            }
        }
        impl $trait<f32> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: f32) -> Tensor {
                self.scalar_op($op, rhs as f64, false)
            }
        }
        impl $trait<&Tensor> for f32 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                rhs.scalar_op($op, self as f64, true)
            }
        }
        impl $trait<Tensor> for f32 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                rhs.scalar_op($op, self as f64, true)
            }
        }
    };
}

binary_operator!(Add, add, BinaryOp::Add);
binary_operator!(Sub, sub, BinaryOp::Subtract);
binary_operator!(Mul, mul, BinaryOp::Multiply);
binary_operator!(Div, div, BinaryOp::Divide);

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::op("negate", false, Location::caller(), &[self], |cx, v| {
            cx.unary(UnaryOp::Negate, v[0])
        })
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        -&self
    }
}
