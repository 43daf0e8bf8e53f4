//! Moving scalar and 4-lane CLIF values between forms: splats, packing and extracting lanes,
//! pred masks, selects, integer widening, constants and iotas.

use super::convert::convert_scalar;
use crate::jit::JitError;
use cranelift_codegen::ir::{types, Endianness, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::{ArrayData, ElementType};

pub(super) fn vflags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// A scalar constant from element `i` of `data`.
pub(crate) fn scalar_constant(
    fb: &mut FunctionBuilder,
    data: &ArrayData,
    i: usize,
) -> Result<Value, JitError> {
    let ty = data.element_type();
    Ok(match data {
        ArrayData::F32(v) => fb.ins().f32const(v[i]),
        ArrayData::F64(v) => fb.ins().f64const(v[i]),
        ArrayData::Pred(v) => fb.ins().iconst(types::I8, v[i] as i64),
        // Held as the f32 of the same value (`types.rs`).
        ArrayData::F16(v) => fb.ins().f32const(v[i].to_f32()),
        ArrayData::BF16(v) => fb.ins().f32const(v[i].to_f32()),
        _ => {
            let t = crate::jit::clif::types::scalar_type(ty)?;
            let bits = data.get_i64(i);
            let masked = if t.bits() < 64 {
                bits & ((1i64 << t.bits()) - 1)
            } else {
                bits
            };
            fb.ins().iconst(t, masked)
        }
    })
}

/// A pred `i8` 0/1 as a 4-lane mask lane value (`i32` 0 / -1).
fn pred_to_mask_lane(fb: &mut FunctionBuilder, p: Value) -> Value {
    let w = fb.ins().uextend(types::I32, p);
    fb.ins().ineg(w)
}

/// Broadcasts a scalar to four lanes (no-op for one lane).
pub(crate) fn splat_if(fb: &mut FunctionBuilder, ty: ElementType, s: Value, lanes: u32) -> Value {
    if lanes == 1 {
        return s;
    }
    match ty {
        ElementType::F32 => fb.ins().splat(types::F32X4, s),
        ElementType::Pred => {
            let m = pred_to_mask_lane(fb, s);
            fb.ins().splat(types::I32X4, m)
        }
        _ => fb.ins().splat(types::I32X4, s),
    }
}

/// Packs four scalar values into one 4-lane value.
pub(crate) fn pack_lanes(fb: &mut FunctionBuilder, ty: ElementType, vals: &[Value]) -> Value {
    let lane = |fb: &mut FunctionBuilder, v: Value| {
        if ty == ElementType::Pred {
            pred_to_mask_lane(fb, v)
        } else {
            v
        }
    };
    let vty = if ty == ElementType::F32 {
        types::F32X4
    } else {
        types::I32X4
    };
    let l0 = lane(fb, vals[0]);
    let mut v = fb.ins().splat(vty, l0);
    for (i, &x) in vals.iter().enumerate().skip(1) {
        let l = lane(fb, x);
        v = fb.ins().insertlane(v, l, i as u8);
    }
    v
}

/// Lane `l` of a 4-lane value as a scalar of element type `ty`.
pub(crate) fn extract_lane(fb: &mut FunctionBuilder, ty: ElementType, v: Value, l: u8) -> Value {
    let x = fb.ins().extractlane(v, l);
    if ty == ElementType::Pred {
        let b = fb.ins().band_imm_s(x, 1);
        fb.ins().ireduce(types::I8, b)
    } else {
        x
    }
}

/// A 4-lane pred mask as 4 bytes 0/1 in an `i32`, ready to store.
pub(crate) fn mask_to_bytes(fb: &mut FunctionBuilder, m: Value) -> Value {
    let h = fb.ins().snarrow(m, m); // i16x8 of 0 / -1
    let b = fb.ins().snarrow(h, h); // i8x16 of 0 / -1
    let one = fb.ins().iconst(types::I8, 1);
    let ones = fb.ins().splat(types::I8X16, one);
    let b = fb.ins().band(b, ones);
    let w = fb.ins().bitcast(types::I32X4, vflags(), b);
    fb.ins().extractlane(w, 0)
}

/// An integer scalar widened (by its signedness) to `i64`.
pub(crate) fn int_to_i64(fb: &mut FunctionBuilder, v: Value, ty: ElementType) -> Value {
    let t = fb.func.dfg.value_type(v);
    if t == types::I64 {
        v
    } else if ty.is_signed_int() {
        fb.ins().sextend(types::I64, v)
    } else {
        fb.ins().uextend(types::I64, v)
    }
}

/// A scalar `i8` condition as a condition for [`select_values`] on values of `lanes` lanes.
pub(crate) fn scalar_cond_for(
    fb: &mut FunctionBuilder,
    c: Value,
    _ty: ElementType,
    lanes: u32,
) -> Value {
    if lanes == 1 {
        c
    } else {
        let m = pred_to_mask_lane(fb, c);
        fb.ins().splat(types::I32X4, m)
    }
}

/// `c ? a : b` where `c` is an `i8` (scalar) or an `i32x4` mask.
pub(crate) fn select_values(
    fb: &mut FunctionBuilder,
    c: Value,
    a: Value,
    b: Value,
    lanes: u32,
) -> Value {
    if lanes == 1 {
        fb.ins().select(c, a, b)
    } else {
        let ty = fb.func.dfg.value_type(a);
        let c = if ty == types::I32X4 {
            c
        } else {
            fb.ins().bitcast(ty, vflags(), c)
        };
        fb.ins().bitselect(c, a, b)
    }
}

/// An iota value `base + lane * coef` converted to `ty`.
pub(crate) fn iota_value(
    fb: &mut FunctionBuilder,
    ty: ElementType,
    base: Value,
    coef: i64,
    lanes: u32,
) -> Result<Value, JitError> {
    if lanes == 1 {
        return convert_scalar(fb, base, ElementType::S64, ty);
    }
    let b32 = fb.ins().ireduce(types::I32, base);
    let splat = fb.ins().splat(types::I32X4, b32);
    let mut bytes = Vec::with_capacity(16);
    for l in 0..4i32 {
        bytes.extend_from_slice(&((l as i64 * coef) as i32).to_le_bytes());
    }
    let c = fb.func.dfg.constants.insert(bytes.into());
    let offs = fb.ins().vconst(types::I32X4, c);
    let v = fb.ins().iadd(splat, offs);
    match ty {
        ElementType::F32 => Ok(fb.ins().fcvt_from_sint(types::F32X4, v)),
        ElementType::S32 | ElementType::U32 => Ok(v),
        _ => Err(JitError::Unsupported(format!("4-lane iota of {ty}"))),
    }
}
