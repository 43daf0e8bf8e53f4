//! Counted loops in CLIF, with static bounds or with bounds known at run time.

use crate::jit::clif::value_at_index::Elemental;
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};

/// Emits `for iv in (start..end).step_by(step) { body(iv) }`; nothing when the range is empty.
pub(crate) fn counted_loop(
    e: &mut Elemental,
    start: i64,
    end: i64,
    step: i64,
    body: &mut dyn FnMut(&mut Elemental, Value) -> Result<(), JitError>,
) -> Result<(), JitError> {
    if start >= end {
        return Ok(());
    }
    if end - start <= step {
        // One trip: no loop at all.
        let iv = e.fb.ins().iconst(types::I64, start);
        e.new_scope();
        body(e, iv)?;
        e.new_scope();
        return Ok(());
    }
    let start = e.fb.ins().iconst(types::I64, start);
    let end = e.fb.ins().iconst(types::I64, end);
    counted_loop_between(e, start, end, step, body)
}

/// Emits `for iv in (start..end).step_by(step) { body(iv) }` with bounds known only at run
/// time (a chunk of a kernel's outermost loop); nothing runs when `start >= end`.
pub(crate) fn counted_loop_between(
    e: &mut Elemental,
    start: Value,
    end: Value,
    step: i64,
    body: &mut dyn FnMut(&mut Elemental, Value) -> Result<(), JitError>,
) -> Result<(), JitError> {
    let header = e.fb.create_block();
    let body_block = e.fb.create_block();
    let exit = e.fb.create_block();
    e.fb.append_block_param(header, types::I64);
    e.fb.ins().jump(header, &[start.into()]);
    e.fb.switch_to_block(header);
    let iv = e.fb.block_params(header)[0];
    let more = e.fb.ins().icmp(IntCC::SignedLessThan, iv, end);
    e.fb.ins().brif(more, body_block, &[], exit, &[]);
    e.fb.seal_block(body_block);
    e.fb.switch_to_block(body_block);
    e.new_scope();
    body(e, iv)?;
    let next = e.fb.ins().iadd_imm_s(iv, step);
    e.fb.ins().jump(header, &[next.into()]);
    e.fb.seal_block(header);
    e.fb.seal_block(exit);
    e.fb.switch_to_block(exit);
    e.new_scope();
    Ok(())
}
