//! `gather` and `scatter` in compiled code: host routines over the arena.
//!
//! A gather copies bytes: the interpreter's [`gather_source_offsets`] maps each result element
//! to the operand element it reads (the indices are only known when the program runs), and
//! the routine copies `element size` bytes per element. A scatter reads its operands into
//! arrays and runs the interpreter's [`ScatterStep`] (so a combiner of any shape works and both
//! backends agree bitwise), then writes the result buffer. Both read every operand before
//! writing, so a result buffer may share memory with an operand. Empty arrays do nothing.

use crate::jit::buffer::{Buffer, Loc};
use crate::jit::host::routine_abi::{guarded, read_array, resolve, write_array, Status};
use crate::jit::JitError;
use std::sync::Arc;
use tessel_compiler::interpreter::{gather_source_offsets, ScatterStep};
use tessel_compiler::ir::{ComputationId, GatherDimensionNumbers, InstrId, Module};

/// A gather instruction: its dimension numbers and where its operands and result live.
pub(crate) struct GatherPlan {
    name: String,
    dims: GatherDimensionNumbers,
    slice_sizes: Vec<i64>,
    operand: Buffer,
    indices: Buffer,
    result: Buffer,
}

impl GatherPlan {
    pub(crate) fn new(
        name: &str,
        dims: &GatherDimensionNumbers,
        slice_sizes: &[i64],
        operand: Buffer,
        indices: Buffer,
        result: &Loc,
    ) -> Result<GatherPlan, JitError> {
        let result = result
            .as_array()
            .cloned()
            .ok_or_else(|| JitError::Invalid(format!("{name}: gather's result is not an array")))?;
        if result.shape.element_type != operand.shape.element_type {
            return Err(JitError::Invalid(format!(
                "{name}: gather's result type differs from its operand's"
            )));
        }
        Ok(GatherPlan {
            name: name.to_string(),
            dims: dims.clone(),
            slice_sizes: slice_sizes.to_vec(),
            operand,
            indices,
            result,
        })
    }

    /// # Safety
    /// `arena` must be the program's arena, holding every buffer of the plan.
    unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        if self.result.shape.element_count() == 0 {
            return Ok(());
        }
        let indices = unsafe { read_array(&self.indices, arena) }?;
        let offsets = gather_source_offsets(
            &self.dims,
            &self.slice_sizes,
            &self.operand.shape,
            &indices,
            &self.result.shape,
        )
        .map_err(|e| e.to_string())?;
        let elem = self.operand.shape.element_type.byte_size();
        let n = self.operand.byte_size();
        let src = unsafe { std::slice::from_raw_parts(resolve(self.operand.addr, arena), n) };
        // Gathered into a vector first: the result may share memory with the operand.
        let mut out = Vec::with_capacity(offsets.len() * elem);
        for &o in &offsets {
            out.extend_from_slice(&src[o * elem..(o + 1) * elem]);
        }
        if out.len() != self.result.byte_size() {
            return Err(format!(
                "gathered {} bytes for a result of {}",
                out.len(),
                self.result.shape
            ));
        }
        let dst = resolve(self.result.addr, arena);
        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), dst, out.len()) };
        Ok(())
    }
}

/// A scatter instruction: the interpreter's step and where its operands and result live.
pub(crate) struct ScatterPlan {
    name: String,
    step: ScatterStep,
    operands: [Buffer; 3],
    result: Buffer,
}

impl ScatterPlan {
    pub(crate) fn new(
        name: &str,
        module: Arc<Module>,
        comp: ComputationId,
        id: InstrId,
        operands: [Buffer; 3],
        result: &Loc,
    ) -> Result<ScatterPlan, JitError> {
        let step = ScatterStep::new(module, comp, id)
            .map_err(|e| JitError::Invalid(format!("{name}: {e}")))?;
        let result = result.as_array().cloned().ok_or_else(|| {
            JitError::Invalid(format!("{name}: scatter's result is not an array"))
        })?;
        Ok(ScatterPlan {
            name: name.to_string(),
            step,
            operands,
            result,
        })
    }

    /// # Safety
    /// `arena` must be the program's arena, holding every buffer of the plan.
    unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        if self.result.shape.element_count() == 0 {
            return Ok(());
        }
        let [a, i, u] = &self.operands;
        let (a, i, u) = unsafe {
            (
                read_array(a, arena)?,
                read_array(i, arena)?,
                read_array(u, arena)?,
            )
        };
        let out = self.step.run(&a, &i, &u).map_err(|e| e.to_string())?;
        if out.shape != self.result.shape {
            return Err(format!(
                "gave {} for a result of {}",
                out.shape, self.result.shape
            ));
        }
        unsafe { write_array(&out, &self.result, arena) }
    }
}

/// The routine the program calls for a gather.
///
/// # Safety
/// `plan` must point to a live `GatherPlan` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn gather_routine(plan: *const GatherPlan, arena: *mut u8) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}

/// The routine the program calls for a scatter.
///
/// # Safety
/// `plan` must point to a live `ScatterPlan` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn scatter_routine(
    plan: *const ScatterPlan,
    arena: *mut u8,
) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}
