//! The recording context: the module being built, name scopes, parameters and trace errors.

use super::dims::{array_shape, IntoDims};
use super::emit::Emitter;
use super::error::{TraceError, TraceIssue};
use super::tensor::Tensor;
use crate::ir::{
    Array, ArrayShape, ComputationId, ElementType, InstrId, Literal, Metadata, Module, Op, Shape,
    SourceLocation,
};
use hashbrown::HashMap;
use std::cell::RefCell;
use std::panic::Location;
use std::rc::Rc;

/// Reduction regions the tracer makes once per element type and reuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RegionKind {
    Sum,
    Max,
    /// `(value, index), (value, index) -> (value, index)` keeping the larger value and, on
    /// ties, the smaller index (the first maximum, like numpy).
    ArgMax(ElementType),
}

/// Everything a trace records; shared by the [`Tracer`] and every [`Tensor`] it made.
pub(crate) struct TraceState {
    pub(crate) module: Module,
    pub(crate) scopes: Vec<String>,
    pub(crate) issues: Vec<TraceIssue>,
    pub(crate) regions: HashMap<(RegionKind, ElementType), ComputationId>,
    next_parameter: u32,
    pub(crate) finished: bool,
}

impl TraceState {
    pub(crate) fn scope_path(&self) -> String {
        self.scopes.join("/")
    }

    pub(crate) fn record(&mut self, op: &str, message: String, location: SourceLocation) {
        let scope = self.scope_path();
        self.issues.push(TraceIssue {
            op: op.to_string(),
            message,
            location,
            scope,
        });
    }
}

/// Converts a caller location into the IR's source location.
pub(crate) fn source_location(loc: &Location<'_>) -> SourceLocation {
    SourceLocation {
        file: loc.file().to_string(),
        line: loc.line(),
        column: loc.column(),
    }
}

/// Records a model function as an HLO [`Module`].
///
/// Ops are methods and operators on [`Tensor`]; the tracer makes parameters and constants,
/// opens name scopes and finally builds the module. A shape mistake does not panic: the op
/// returns a tensor marked as failed, later ops on it are skipped quietly, and
/// [`Tracer::finish`] returns every mistake with the line of the model function that made it.
pub struct Tracer {
    pub(crate) state: Rc<RefCell<TraceState>>,
}

impl Tracer {
    /// Starts a trace of a module named `name` (its entry computation is `main.NAME`).
    pub fn new(name: impl Into<String>) -> Tracer {
        Tracer {
            state: Rc::new(RefCell::new(TraceState {
                module: Module::new(name),
                scopes: Vec::new(),
                issues: Vec::new(),
                regions: HashMap::new(),
                next_parameter: 0,
                finished: false,
            })),
        }
    }

    /// Adds the next entry parameter. `dims` may mix fixed sizes and [`super::Dim::Unknown`]:
    /// `t.parameter("x", &[784, 10], F32)` or `t.parameter("x", &[Dim::Unknown, Dim::Fixed(784)], F32)`.
    #[track_caller]
    pub fn parameter(&mut self, name: &str, dims: impl IntoDims, ty: ElementType) -> Tensor {
        let loc = Location::caller();
        let dims = dims.into_dims();
        let mut st = self.state.borrow_mut();
        if let Some(bad) = dims.iter().find(|d| d.fixed().is_some_and(|n| n < 0)) {
            let msg = format!("parameter `{name}` has a negative dimension {bad}");
            st.record("parameter", msg, source_location(loc));
            drop(st);
            return Tensor::failed(&self.state);
        }
        let number = st.next_parameter;
        st.next_parameter += 1;
        let shape = array_shape(ty, &dims);
        let base = instruction_base_name(name);
        let instr_name = st.module.unique_name(&base);
        let op_name = match st.scope_path() {
            s if s.is_empty() => name.to_string(),
            s => format!("{s}/{name}"),
        };
        let metadata = Metadata {
            op_name: Some(op_name),
            source: Some(source_location(loc)),
            ..Metadata::default()
        };
        let entry = st.module.entry;
        let mut instr =
            crate::ir::Instruction::new(instr_name, Op::Parameter(number), Shape::Array(shape));
        instr.metadata = metadata;
        let id = st.module.computation_mut(entry).add(instr, &[]);
        drop(st);
        Tensor::new(&self.state, id)
    }

    /// A constant array.
    #[track_caller]
    pub fn constant(&mut self, value: Array) -> Tensor {
        let loc = Location::caller();
        self.emit_leaf("constant", loc, move |cx| {
            let shape = value.shape.clone();
            Ok(cx.emit_array(Op::Constant(Literal::Array(value)), shape, &[]))
        })
    }

    /// A scalar constant of type `ty` (the value is converted to it).
    #[track_caller]
    pub fn scalar(&mut self, value: f64, ty: ElementType) -> Tensor {
        let loc = Location::caller();
        self.emit_leaf("constant", loc, move |cx| Ok(cx.constant_scalar(ty, value)))
    }

    /// A tensor of the given dimensions filled with `value` (a scalar constant, broadcast).
    #[track_caller]
    pub fn full(&mut self, dims: impl IntoDims, value: f64, ty: ElementType) -> Tensor {
        let loc = Location::caller();
        let dims = dims.into_dims();
        self.emit_leaf("full", loc, move |cx| {
            let c = cx.constant_scalar(ty, value);
            cx.broadcast_to(c, &dims)
        })
    }

    /// Runs `f` inside the name scope `name`: ops made in it get `op_name` `name/op`
    /// (nested scopes join with `/`, like TF's `name_scope` and JAX's `named_scope`).
    pub fn scope<R>(&mut self, name: &str, f: impl FnOnce(&mut Tracer) -> R) -> R {
        self.state.borrow_mut().scopes.push(name.to_string());
        let result = f(self);
        self.state.borrow_mut().scopes.pop();
        result
    }

    /// The problems recorded so far (also returned by [`Tracer::finish`]).
    pub fn issues(&self) -> Vec<TraceIssue> {
        self.state.borrow().issues.clone()
    }

    /// Runs `f` on the module being built and its entry computation. For extensions of the
    /// tracing API that build instructions themselves and wrap the results with
    /// [`Tracer::tensor`].
    pub fn with_module<R>(&self, f: impl FnOnce(&mut Module, ComputationId) -> R) -> R {
        let mut st = self.state.borrow_mut();
        let entry = st.module.entry;
        f(&mut st.module, entry)
    }

    /// A tensor for an array-shaped instruction of the entry computation (see
    /// [`Tracer::with_module`]); anything else gives a failed tensor and a trace error.
    #[track_caller]
    pub fn tensor(&self, id: InstrId) -> Tensor {
        let loc = Location::caller();
        let st = self.state.borrow();
        let entry = st.module.entry;
        let comp = st.module.computation(entry);
        let problem = if !comp.contains(id) {
            Some("no such instruction in the entry computation".to_string())
        } else if !comp.get(id).shape.is_array() {
            Some(format!("`{}` is not an array", comp.get(id).name))
        } else {
            None
        };
        drop(st);
        match problem {
            None => Tensor::new(&self.state, id),
            Some(msg) => {
                self.state
                    .borrow_mut()
                    .record("tensor", msg, source_location(loc));
                Tensor::failed(&self.state)
            }
        }
    }

    /// Ends the trace: the module whose entry returns `outputs` (one output is the root
    /// itself; several become a tuple). Fails with every problem met while tracing.
    #[track_caller]
    pub fn finish(self, outputs: &[&Tensor]) -> Result<Module, TraceError> {
        let loc = Location::caller();
        let mut st = self.state.borrow_mut();
        let name = st.module.name.clone();
        if outputs.is_empty() {
            st.record(
                "finish",
                "a module needs at least one output".into(),
                source_location(loc),
            );
        }
        for (i, out) in outputs.iter().enumerate() {
            if !Rc::ptr_eq(&out.state, &self.state) {
                let msg = format!("output {i} was made by a different tracer");
                st.record("finish", msg, source_location(loc));
            }
        }
        let ids: Vec<Option<InstrId>> = outputs.iter().map(|t| t.id).collect();
        if !st.issues.is_empty() || ids.iter().any(|id| id.is_none()) {
            st.finished = true;
            return Err(TraceError {
                module: name,
                issues: st.issues.clone(),
            });
        }
        let ids: Vec<InstrId> = ids.into_iter().flatten().collect();
        let root = if ids.len() == 1 {
            ids[0]
        } else {
            let mut cx = Emitter::new(&mut st, source_location(loc), None);
            let shapes = ids.iter().map(|&id| cx.full_shape(id)).collect();
            cx.emit(Op::Tuple, Shape::Tuple(shapes), &ids)
        };
        let entry = st.module.entry;
        st.module.computation_mut(entry).set_root(root);
        st.finished = true;
        let module = std::mem::replace(&mut st.module, Module::new(name));
        Ok(put_entry_last(module))
    }

    /// Emits an op without tensor operands (constants) through an [`Emitter`].
    pub(crate) fn emit_leaf(
        &mut self,
        op: &str,
        loc: &'static Location<'static>,
        f: impl FnOnce(&mut Emitter) -> Result<InstrId, String>,
    ) -> Tensor {
        let mut st = self.state.borrow_mut();
        let mut cx = Emitter::new(&mut st, source_location(loc), None);
        let result = f(&mut cx).and_then(|id| match cx.inconsistency.take() {
            Some(msg) => Err(msg),
            None => Ok(id),
        });
        match result {
            Ok(id) => {
                drop(st);
                Tensor::new(&self.state, id)
            }
            Err(msg) => {
                st.record(op, msg, source_location(loc));
                drop(st);
                Tensor::failed(&self.state)
            }
        }
    }
}

/// A parameter name usable as an HLO instruction name (letters, digits, `_`, `-`).
fn instruction_base_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() || cleaned.starts_with(|c: char| c.is_ascii_digit()) {
        format!("p{cleaned}")
    } else {
        cleaned
    }
}

/// Moves the entry computation (index 0 while tracing) after the regions it calls, so that
/// called computations come before their callers as in HLO text.
fn put_entry_last(mut module: Module) -> Module {
    let n = module.computations.len() as u32;
    if n <= 1 {
        return module;
    }
    let remap = |c: ComputationId| {
        if c.0 == 0 {
            ComputationId(n - 1)
        } else {
            ComputationId(c.0 - 1)
        }
    };
    for comp in &mut module.computations {
        let ids: Vec<InstrId> = comp.ids().to_vec();
        for id in ids {
            comp.get_mut(id).op.map_called_computations(remap);
        }
    }
    let entry = module.computations.remove(0);
    module.computations.push(entry);
    module.entry = ComputationId(n - 1);
    module
}

/// The array shape of a tensor's instruction in `state` (tracing only makes arrays, except
/// the final tuple).
pub(crate) fn array_shape_of(st: &TraceState, id: InstrId) -> ArrayShape {
    let entry = st.module.entry;
    match &st.module.computation(entry).get(id).shape {
        Shape::Array(a) => a.clone(),
        other => panic!("traced value with non-array shape {other}"),
    }
}
