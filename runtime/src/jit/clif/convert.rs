//! Conversions between element types with XLA's semantics (saturating float-to-int), scalar
//! and 4-lane.

use super::lane_values::vflags;
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::ElementType;

/// Scalar conversion between element types with XLA's semantics.
pub(crate) fn convert_scalar(
    fb: &mut FunctionBuilder,
    x: Value,
    from: ElementType,
    to: ElementType,
) -> Result<Value, JitError> {
    use ElementType as E;
    if from == to {
        return Ok(x);
    }
    let tt = crate::jit::clif::types::scalar_type(to)?;
    let ft = fb.func.dfg.value_type(x);
    if to == E::Pred {
        return Ok(if from.is_float() {
            let z = if from == E::F64 {
                fb.ins().f64const(0.0)
            } else {
                fb.ins().f32const(0.0)
            };
            fb.ins().fcmp(FloatCC::NotEqual, x, z)
        } else {
            fb.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
        });
    }
    if from.is_float() && to.is_float() {
        return Ok(if tt.bits() > ft.bits() {
            fb.ins().fpromote(tt, x)
        } else {
            fb.ins().fdemote(tt, x)
        });
    }
    if from.is_float() {
        // Saturating, NaN to 0; narrow targets go through i32 then clamp.
        let wide = if tt.bits() < 32 { types::I32 } else { tt };
        let v = if to.is_signed_int() {
            fb.ins().fcvt_to_sint_sat(wide, x)
        } else {
            fb.ins().fcvt_to_uint_sat(wide, x)
        };
        if wide == tt {
            return Ok(v);
        }
        let (lo, hi) = int_range(to);
        let lo = fb.ins().iconst(types::I32, lo);
        let hi = fb.ins().iconst(types::I32, hi);
        let v = if to.is_signed_int() {
            fb.ins().smax(v, lo)
        } else {
            fb.ins().umax(v, lo)
        };
        let v = if to.is_signed_int() {
            fb.ins().smin(v, hi)
        } else {
            fb.ins().umin(v, hi)
        };
        return Ok(fb.ins().ireduce(tt, v));
    }
    // From an integer or pred.
    let signed_src = from.is_signed_int();
    if to.is_float() {
        let x = if ft.bits() < 32 {
            if signed_src {
                fb.ins().sextend(types::I32, x)
            } else {
                fb.ins().uextend(types::I32, x)
            }
        } else {
            x
        };
        return Ok(if signed_src {
            fb.ins().fcvt_from_sint(tt, x)
        } else {
            fb.ins().fcvt_from_uint(tt, x)
        });
    }
    Ok(if tt.bits() > ft.bits() {
        if signed_src {
            fb.ins().sextend(tt, x)
        } else {
            fb.ins().uextend(tt, x)
        }
    } else if tt.bits() < ft.bits() {
        fb.ins().ireduce(tt, x)
    } else {
        x
    })
}

fn int_range(t: ElementType) -> (i64, i64) {
    use ElementType as E;
    match t {
        E::S8 => (i8::MIN as i64, i8::MAX as i64),
        E::U8 => (0, u8::MAX as i64),
        E::S16 => (i16::MIN as i64, i16::MAX as i64),
        E::U16 => (0, u16::MAX as i64),
        _ => (i32::MIN as i64, i32::MAX as i64),
    }
}

pub(super) fn convert_vector(
    fb: &mut FunctionBuilder,
    x: Value,
    from: ElementType,
    to: ElementType,
) -> Result<Value, JitError> {
    use ElementType as E;
    if from == to || (from.is_integer() && to.is_integer()) {
        return Ok(x);
    }
    Ok(match (from, to) {
        (E::S32, E::F32) => fb.ins().fcvt_from_sint(types::F32X4, x),
        (E::F32, E::S32) => fb.ins().fcvt_to_sint_sat(types::I32X4, x),
        (E::Pred, E::F32) => {
            // Mask & bits(1.0) is 1.0 or 0.0.
            let one = fb.ins().iconst(types::I32, 1.0f32.to_bits() as i64);
            let ones = fb.ins().splat(types::I32X4, one);
            let b = fb.ins().band(x, ones);
            fb.ins().bitcast(types::F32X4, vflags(), b)
        }
        (E::Pred, _) => {
            let one = fb.ins().iconst(types::I32, 1);
            let ones = fb.ins().splat(types::I32X4, one);
            fb.ins().band(x, ones)
        }
        (E::F32, E::Pred) => {
            let z = fb.ins().f32const(0.0);
            let zs = fb.ins().splat(types::F32X4, z);
            fb.ins().fcmp(FloatCC::NotEqual, x, zs)
        }
        (_, E::Pred) => {
            let z = fb.ins().iconst(types::I32, 0);
            let zs = fb.ins().splat(types::I32X4, z);
            fb.ins().icmp(IntCC::NotEqual, x, zs)
        }
        _ => {
            return Err(JitError::Unsupported(format!(
                "4-lane convert {from} to {to}"
            )))
        }
    })
}
