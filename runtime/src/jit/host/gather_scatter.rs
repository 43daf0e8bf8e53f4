//! `gather` and `scatter` in compiled code: host routines over the arena.
//!
//! A gather copies bytes: the interpreter's [`gather_source_offsets`] maps each result element
//! to the operand element it reads (the indices are only known when the program runs), and
//! the routine copies `element size` bytes per element. A scatter reads its operands into
//! arrays and runs the interpreter's [`ScatterStep`] (so a combiner of any shape works and both
//! backends agree bitwise), then writes the result buffer. Both read every operand before
//! writing, so a result buffer may share memory with an operand. Empty arrays do nothing.
//!
//! Gathers and scatter-adds of whole rows (an embedding lookup and its gradient) take the
//! faster, bitwise-equal paths of `row_gather_scatter.rs` instead.

use crate::jit::buffer::{Buffer, Loc};
use crate::jit::host::routine_abi::{guarded, read_array, resolve, write_array, Status};
use crate::jit::host::row_gather_scatter::{
    gather_rows, row_gather, row_scatter_add, scatter_add_rows, RowIndexing,
};
use crate::jit::JitError;
use std::sync::Arc;
use tessel_compiler::interpreter::{gather_source_offsets, ScatterStep};
use tessel_compiler::ir::{
    ComputationId, ElementType, GatherDimensionNumbers, InstrId, Module, Op,
};

/// A gather instruction: its dimension numbers and where its operands and result live.
pub(crate) struct GatherPlan {
    name: String,
    dims: GatherDimensionNumbers,
    slice_sizes: Vec<i64>,
    operand: Buffer,
    indices: Buffer,
    result: Buffer,
    /// Set when the gather takes whole rows: one copy per row.
    rows: Option<RowIndexing>,
    /// Threads the row path may use.
    threads: usize,
}

impl GatherPlan {
    pub(crate) fn new(
        name: &str,
        dims: &GatherDimensionNumbers,
        slice_sizes: &[i64],
        operand: Buffer,
        indices: Buffer,
        result: &Loc,
        threads: usize,
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
        let rows = row_gather(
            dims,
            slice_sizes,
            &operand.shape,
            &indices.shape,
            &result.shape,
        );
        Ok(GatherPlan {
            rows,
            threads,
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
        if let Some(rows) = &self.rows {
            unsafe { self.run_rows(rows, arena) };
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

    /// The row path: straight into the result unless it shares memory with an operand.
    ///
    /// # Safety
    /// As [`Self::run`].
    unsafe fn run_rows(&self, rows: &RowIndexing, arena: *mut u8) {
        let row_bytes = rows.row_len() * self.operand.shape.element_type.byte_size();
        let src = resolve(self.operand.addr, arena);
        let idx = resolve(self.indices.addr, arena);
        let dst = resolve(self.result.addr, arena);
        let n = self.result.byte_size();
        if overlaps(dst, n, &self.operand, src) || overlaps(dst, n, &self.indices, idx) {
            let mut out = vec![0u8; n];
            unsafe {
                gather_rows(rows, src, idx, out.as_mut_ptr(), row_bytes, self.threads);
                std::ptr::copy_nonoverlapping(out.as_ptr(), dst, n);
            }
        } else {
            unsafe { gather_rows(rows, src, idx, dst, row_bytes, self.threads) };
        }
    }
}

/// Whether `n` bytes at `p` share memory with buffer `b`, which lives at `at`.
fn overlaps(p: *const u8, n: usize, b: &Buffer, at: *const u8) -> bool {
    let (p, at) = (p as usize, at as usize);
    p < at + b.byte_size() && at < p + n
}

/// Whether `p` is aligned for elements of type `T`.
fn aligned_for<T>(p: *const u8) -> bool {
    p.cast::<T>().is_aligned()
}

/// A scatter instruction: the interpreter's step and where its operands and result live.
pub(crate) struct ScatterPlan {
    name: String,
    step: ScatterStep,
    operands: [Buffer; 3],
    result: Buffer,
    /// Set when the scatter adds whole rows (with the combiner's operand order).
    rows: Option<(RowIndexing, bool)>,
    /// Threads the row path may use.
    threads: usize,
}

impl ScatterPlan {
    pub(crate) fn new(
        name: &str,
        module: Arc<Module>,
        comp: ComputationId,
        id: InstrId,
        operands: [Buffer; 3],
        result: &Loc,
        threads: usize,
    ) -> Result<ScatterPlan, JitError> {
        let step = ScatterStep::new(module.clone(), comp, id)
            .map_err(|e| JitError::Invalid(format!("{name}: {e}")))?;
        let result = result.as_array().cloned().ok_or_else(|| {
            JitError::Invalid(format!("{name}: scatter's result is not an array"))
        })?;
        let rows = match &module.computation(comp).get(id).op {
            Op::Scatter { dims, to_apply, .. } => row_scatter_add(
                &module,
                dims,
                *to_apply,
                &operands[0].shape,
                &operands[1].shape,
                &operands[2].shape,
            ),
            _ => None,
        }
        .filter(|_| operands[0].shape == result.shape);
        Ok(ScatterPlan {
            rows,
            threads,
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
        if let Some((rows, swapped)) = &self.rows {
            if unsafe { self.run_rows(rows, *swapped, arena) } {
                return Ok(());
            }
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

    /// The row path: the operand copied to the result (unless they are one buffer), then
    /// each update row added in place. False, having written nothing, when the result
    /// shares memory with the indices or updates or is misaligned: the general path runs.
    ///
    /// # Safety
    /// As [`Self::run`].
    unsafe fn run_rows(&self, rows: &RowIndexing, swapped: bool, arena: *mut u8) -> bool {
        let [a, i, u] = &self.operands;
        let (src, idx, upd) = (
            resolve(a.addr, arena),
            resolve(i.addr, arena),
            resolve(u.addr, arena),
        );
        let dst = resolve(self.result.addr, arena);
        let n = self.result.byte_size();
        if overlaps(dst, n, i, idx) || overlaps(dst, n, u, upd) {
            return false;
        }
        let t = self.result.shape.element_type;
        let fits = match t {
            ElementType::F32 => aligned_for::<f32>(dst) && aligned_for::<f32>(upd),
            _ => aligned_for::<f64>(dst) && aligned_for::<f64>(upd),
        };
        if !fits {
            return false;
        }
        // Rows are copied from the operand by the threads that add into them, unless the
        // two are one buffer; an operand that overlaps the result otherwise is copied first.
        let operand = if src == dst {
            None
        } else if overlaps(dst, n, a, src) {
            // `copy`, not `copy_nonoverlapping`: the two overlap.
            unsafe { std::ptr::copy(src, dst, n) };
            None
        } else {
            Some(src)
        };
        let len = self.result.shape.element_count() as usize;
        let out_rows = len / rows.row_len().max(1);
        let ups = u.shape.element_count() as usize;
        unsafe {
            if t == ElementType::F32 {
                let ups = std::slice::from_raw_parts(upd as *const f32, ups);
                let operand = operand.map(|p| p as *const f32);
                let out = dst as *mut f32;
                scatter_add_rows(
                    rows,
                    idx,
                    ups,
                    operand,
                    out,
                    out_rows,
                    swapped,
                    self.threads,
                );
            } else {
                let ups = std::slice::from_raw_parts(upd as *const f64, ups);
                let operand = operand.map(|p| p as *const f64);
                let out = dst as *mut f64;
                scatter_add_rows(
                    rows,
                    idx,
                    ups,
                    operand,
                    out,
                    out_rows,
                    swapped,
                    self.threads,
                );
            }
        }
        true
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
