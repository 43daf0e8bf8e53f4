//! Collectives in compiled code: all-reduce, all-gather, reduce-scatter, collective-permute,
//! all-to-all, replica-id and partition-id are host routines.
//!
//! The program calls `collective_routine(plan, arena)`. The routine reads the operand buffers,
//! hands them to the interpreter's [`CollectiveStep`] with the calling thread's replica
//! context (its `ReplicaLink`) (set by [`crate::jit::program::executable::Executable::run_replicated`]; outside a replicated
//! run it is replica 0 of one), and writes the result buffers. The step meets the other
//! members of the replica group at the run's rendezvous and reduces in replica-id order, so
//! the JIT and the interpreter give bitwise the same values on every replica. A replica
//! that failed elsewhere makes the rendezvous fail here, which returns an error status and
//! leaves the program at once.

use crate::jit::buffer::{Buffer, Loc};
use crate::jit::host::routine_abi::{guarded, read_array, resolve, Status};
use crate::jit::JitError;
use crate::replicas::pool::{array_from_le_bytes, with_le_bytes, SparePool};
use std::sync::Arc;
use tessel_compiler::interpreter::CollectiveStep;
use tessel_compiler::ir::{Array, ComputationId, InstrId, Literal, Module};

/// One collective instruction: where its operands and result live.
pub(crate) struct CollectivePlan {
    name: String,
    step: CollectiveStep,
    operands: Vec<Buffer>,
    results: Vec<Buffer>,
}

impl CollectivePlan {
    pub(crate) fn new(
        name: &str,
        module: Arc<Module>,
        comp: ComputationId,
        id: InstrId,
        operands: Vec<Buffer>,
        result: &Loc,
    ) -> Result<CollectivePlan, JitError> {
        let step = CollectiveStep::new(module, comp, id)
            .map_err(|e| JitError::Invalid(format!("{name}: {e}")))?;
        let results: Vec<Buffer> = result.leaves().into_iter().cloned().collect();
        Ok(CollectivePlan {
            name: name.to_string(),
            step,
            operands,
            results,
        })
    }

    /// # Safety
    /// `arena` must be the program's arena, holding every buffer of the plan.
    unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        crate::replicas::with_current(|env| {
            env.before_collective()?;
            // The operands are read into the run's spare arrays when it has some of their
            // size, and the results go back there once written: a loop's collectives then
            // allocate nothing after their first step.
            let pool = env.context.pool();
            let values: Vec<Literal> = self
                .operands
                .iter()
                .map(|b| unsafe { read_into(b, arena, pool) }.map(Literal::Array))
                .collect::<Result<_, _>>()?;
            let out = self
                .step
                .run_owned(&env.context, values)
                .map_err(|e| e.to_string())?;
            let leaves = out.leaves();
            if leaves.len() != self.results.len() {
                return Err(format!(
                    "gave {} values for {} result buffers",
                    leaves.len(),
                    self.results.len()
                ));
            }
            for (value, buffer) in leaves.into_iter().zip(&self.results) {
                if value.shape != buffer.shape {
                    return Err(format!(
                        "gave {} for a result of {}",
                        value.shape, buffer.shape
                    ));
                }
                unsafe { write_from(value, buffer, arena) }?;
            }
            if let Some(pool) = pool {
                pool.put_literals(vec![out]);
            }
            Ok(())
        })
    }
}

/// Buffer `b` of the arena as an array, in a spare of `pool` when it has one of its size.
///
/// # Safety
/// `b` must be a live buffer of `arena`.
unsafe fn read_into(b: &Buffer, arena: *mut u8, pool: Option<&SparePool>) -> Result<Array, String> {
    let spare = pool.and_then(|p| p.take(&b.shape));
    if spare.is_none() {
        return unsafe { read_array(b, arena) };
    }
    let n = b.byte_size();
    let bytes = unsafe { std::slice::from_raw_parts(resolve(b.addr, arena) as *const u8, n) };
    array_from_le_bytes(&b.shape, bytes, spare)
        .ok_or_else(|| format!("a {} buffer of {n} bytes", b.shape))
}

/// Writes `a` into the arena's buffer `out`, which must be exactly its size, without an
/// intermediate copy.
///
/// # Safety
/// `out` must be a live buffer of `arena` that nothing else reads or writes meanwhile.
unsafe fn write_from(a: &Array, out: &Buffer, arena: *mut u8) -> Result<(), String> {
    with_le_bytes(&a.data, |bytes| {
        if bytes.len() != out.byte_size() {
            return Err(format!("{} bytes for a {} buffer", bytes.len(), out.shape));
        }
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), resolve(out.addr, arena), bytes.len())
        };
        Ok(())
    })
}

/// The routine the program calls for a collective.
///
/// # Safety
/// `plan` must point to a live `CollectivePlan` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn collective_routine(
    plan: *const CollectivePlan,
    arena: *mut u8,
) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}
