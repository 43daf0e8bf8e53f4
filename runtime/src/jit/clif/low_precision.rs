//! `bf16` and `f16` values, held as f32 in CLIF: ops computed in f32 and rounded back to
//! nearest even, and the 16-bit bits they are loaded from and stored as.

use super::element_ops::{emit_op, Libcalls};
use crate::jit::clif::types::{compute_type, is_low_precision};
use crate::jit::JitError;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::{ElementType, Op};

// Rounding to nearest even, and the bits a 16-bit float is stored as.
extern "C" fn round_bf16(a: f32) -> f32 {
    half::bf16::from_f32(a).to_f32()
}
extern "C" fn round_f16(a: f32) -> f32 {
    half::f16::from_f32(a).to_f32()
}
extern "C" fn f16_bits_to_f32(bits: i32) -> f32 {
    half::f16::from_bits(bits as u16).to_f32()
}
extern "C" fn f32_to_f16_bits(a: f32) -> i32 {
    half::f16::from_f32(a).to_bits() as i32
}

/// An op on `bf16`/`f16` values (held as f32): computed in f32, the result rounded back to
/// its 16-bit type to nearest even, as XLA:CPU computes them (`docs/jit.md`).
#[allow(clippy::too_many_arguments)]
pub(super) fn low_precision_op(
    fb: &mut FunctionBuilder,
    lib: &Libcalls<'_>,
    has_fma: bool,
    op: &Op,
    out: ElementType,
    arg_tys: &[ElementType],
    args: &[Value],
    lanes: u32,
) -> Result<Value, JitError> {
    if lanes > 1 {
        return Err(JitError::Invalid(format!(
            "{} on {out} in 4-lane code",
            op.opcode_name()
        )));
    }
    if matches!(op, Op::BitcastConvert) {
        return Err(JitError::Unsupported(format!(
            "bitcast-convert from {} to {out}",
            arg_tys[0]
        )));
    }
    let tys: Vec<ElementType> = arg_tys.iter().map(|&t| compute_type(t)).collect();
    let v = emit_op(fb, lib, has_fma, op, compute_type(out), &tys, args, 1)?;
    Ok(if is_low_precision(out) {
        round_to(fb, lib, v, out)
    } else {
        v
    })
}

/// `x` (an f32) rounded to the nearest `ty` (bf16 or f16) value, still as an f32.
pub(crate) fn round_to(
    fb: &mut FunctionBuilder,
    lib: &Libcalls<'_>,
    x: Value,
    ty: ElementType,
) -> Value {
    let f = if ty == ElementType::BF16 {
        round_bf16 as *const () as usize
    } else {
        round_f16 as *const () as usize
    };
    lib.call(fb, f, types::F32, &[x])
}

/// A 16-bit float's bits (an `i16` loaded from memory) as the f32 of its value.
pub(crate) fn widen_bits(
    fb: &mut FunctionBuilder,
    lib: &Libcalls<'_>,
    bits: Value,
    ty: ElementType,
) -> Value {
    let w = fb.ins().uextend(types::I32, bits);
    if ty == ElementType::BF16 {
        // bf16 is the top half of an f32.
        let hi = fb.ins().ishl_imm_u(w, 16);
        fb.ins().bitcast(types::F32, MemFlagsData::new(), hi)
    } else {
        let f = f16_bits_to_f32 as *const () as usize;
        lib.call_typed(fb, f, types::I32, types::F32, &[w])
    }
}

/// The `i16` bits to store for `x`, an f32 holding a value of `ty` (already rounded to it).
pub(crate) fn narrow_bits(
    fb: &mut FunctionBuilder,
    lib: &Libcalls<'_>,
    x: Value,
    ty: ElementType,
) -> Value {
    let w = if ty == ElementType::BF16 {
        let b = fb.ins().bitcast(types::I32, MemFlagsData::new(), x);
        fb.ins().ushr_imm_u(b, 16)
    } else {
        let f = f32_to_f16_bits as *const () as usize;
        lib.call_typed(fb, f, types::F32, types::I32, &[x])
    };
    fb.ins().ireduce(types::I16, w)
}
