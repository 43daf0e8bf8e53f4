//! One elementwise op on CLIF values, scalar or 4-lane, with HLO's semantics (integer division
//! by zero, shifts past the bit width, NaN-propagating max/min, saturating float-to-int).
//! An op with no 4-lane form here is applied lane by lane.

use crate::jit::clif::symbols::Symbols;
use crate::jit::clif::types::{compute_type, is_low_precision};
use crate::jit::clif::vector_math::Vm;
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Endianness, InstBuilder, MemFlagsData, Signature, Type, Value,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::{
    ArrayData, BinaryOp, ComparisonDirection, ComparisonType, ElementType, Op, UnaryOp,
};

/// Rust functions the generated code calls for operations with no CLIF form here.
pub struct Libcalls<'a> {
    pub call_conv: CallConv,
    /// Where the functions' addresses come from.
    pub symbols: &'a Symbols,
}

macro_rules! libfn {
    ($name:ident, $t:ty, |$($a:ident),*| $body:expr) => {
        extern "C" fn $name($($a: $t),*) -> $t {
            $body
        }
    };
}

libfn!(fmod_f32, f32, |a, b| a % b);
libfn!(pow_f32, f32, |a, b| a.powf(b));
libfn!(atan2_f32, f32, |a, b| a.atan2(b));
libfn!(cbrt_f32, f32, |a| a.cbrt());
libfn!(tan_f32, f32, |a| a.tan());
// Rust's standard library has no erf: libm's, as the interpreter uses.
libfn!(erf_f32, f32, |a| libm::erff(a));
libfn!(erf_f64, f64, |a| libm::erf(a));
libfn!(fmod_f64, f64, |a, b| a % b);
libfn!(pow_f64, f64, |a, b| a.powf(b));
libfn!(atan2_f64, f64, |a, b| a.atan2(b));
libfn!(cbrt_f64, f64, |a| a.cbrt());
libfn!(tan_f64, f64, |a| a.tan());
libfn!(exp_f64, f64, |a| a.exp());
libfn!(expm1_f64, f64, |a| a.exp_m1());
libfn!(log_f64, f64, |a| a.ln());
libfn!(log1p_f64, f64, |a| a.ln_1p());
libfn!(tanh_f64, f64, |a| a.tanh());
libfn!(logistic_f64, f64, |a| 1.0 / (1.0 + (-a).exp()));
libfn!(sin_f64, f64, |a| a.sin());
// 16-bit floats: rounding to nearest even, and the bits they are stored as.
libfn!(round_bf16, f32, |a| half::bf16::from_f32(a).to_f32());
libfn!(round_f16, f32, |a| half::f16::from_f32(a).to_f32());
extern "C" fn f16_bits_to_f32(bits: i32) -> f32 {
    half::f16::from_bits(bits as u16).to_f32()
}
extern "C" fn f32_to_f16_bits(a: f32) -> i32 {
    half::f16::from_f32(a).to_bits() as i32
}
libfn!(cos_f64, f64, |a| a.cos());

impl Libcalls<'_> {
    fn call(&self, fb: &mut FunctionBuilder, f: usize, ty: Type, args: &[Value]) -> Value {
        self.call_typed(fb, f, ty, ty, args)
    }

    /// Calls `f(args: param) -> ret`.
    fn call_typed(
        &self,
        fb: &mut FunctionBuilder,
        f: usize,
        param: Type,
        ret: Type,
        args: &[Value],
    ) -> Value {
        let mut sig = Signature::new(self.call_conv);
        for _ in args {
            sig.params.push(AbiParam::new(param));
        }
        sig.returns.push(AbiParam::new(ret));
        let sigref = fb.import_signature(sig);
        let callee = self.symbols.function(fb, f);
        let call = fb.ins().call_indirect(sigref, callee, args);
        fb.inst_results(call)[0]
    }
}

fn vflags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// A scalar constant from element `i` of `data`.
pub fn scalar_constant(
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
pub fn splat_if(fb: &mut FunctionBuilder, ty: ElementType, s: Value, lanes: u32) -> Value {
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
pub fn pack_lanes(fb: &mut FunctionBuilder, ty: ElementType, vals: &[Value]) -> Value {
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
pub fn extract_lane(fb: &mut FunctionBuilder, ty: ElementType, v: Value, l: u8) -> Value {
    let x = fb.ins().extractlane(v, l);
    if ty == ElementType::Pred {
        let b = fb.ins().band_imm_s(x, 1);
        fb.ins().ireduce(types::I8, b)
    } else {
        x
    }
}

/// A 4-lane pred mask as 4 bytes 0/1 in an `i32`, ready to store.
pub fn mask_to_bytes(fb: &mut FunctionBuilder, m: Value) -> Value {
    let h = fb.ins().snarrow(m, m); // i16x8 of 0 / -1
    let b = fb.ins().snarrow(h, h); // i8x16 of 0 / -1
    let one = fb.ins().iconst(types::I8, 1);
    let ones = fb.ins().splat(types::I8X16, one);
    let b = fb.ins().band(b, ones);
    let w = fb.ins().bitcast(types::I32X4, vflags(), b);
    fb.ins().extractlane(w, 0)
}

/// An integer scalar widened (by its signedness) to `i64`.
pub fn int_to_i64(fb: &mut FunctionBuilder, v: Value, ty: ElementType) -> Value {
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
pub fn scalar_cond_for(fb: &mut FunctionBuilder, c: Value, _ty: ElementType, lanes: u32) -> Value {
    if lanes == 1 {
        c
    } else {
        let m = pred_to_mask_lane(fb, c);
        fb.ins().splat(types::I32X4, m)
    }
}

/// `c ? a : b` where `c` is an `i8` (scalar) or an `i32x4` mask.
pub fn select_values(fb: &mut FunctionBuilder, c: Value, a: Value, b: Value, lanes: u32) -> Value {
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
pub fn iota_value(
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

/// Whether `op` has a 4-lane form for these types.
fn has_vector_form(op: &Op, out: ElementType, args: &[ElementType]) -> bool {
    let all32 = |t: ElementType| {
        matches!(
            t,
            ElementType::F32 | ElementType::S32 | ElementType::U32 | ElementType::Pred
        )
    };
    if !all32(out) || !args.iter().all(|&t| all32(t)) {
        return false;
    }
    let float = out == ElementType::F32;
    match op {
        Op::Unary(u) => match u {
            UnaryOp::Abs | UnaryOp::Negate => out != ElementType::Pred,
            UnaryOp::Not => true,
            UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::RoundNearestEven
            | UnaryOp::RoundNearestAfz
            | UnaryOp::Sign
            | UnaryOp::Sine
            | UnaryOp::Cosine => float,
            UnaryOp::IsFinite => args[0] == ElementType::F32,
            _ => false,
        },
        Op::Binary(b) => match b {
            BinaryOp::Add
            | BinaryOp::Subtract
            | BinaryOp::Multiply
            | BinaryOp::Maximum
            | BinaryOp::Minimum => out != ElementType::Pred,
            BinaryOp::Divide => float,
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => !float,
            _ => false,
        },
        Op::Compare { .. } | Op::Select | Op::Copy => true,
        Op::Clamp => out != ElementType::Pred,
        Op::Convert => {
            let from = args[0];
            from == out
                || (from == ElementType::S32 && out == ElementType::F32)
                || (from == ElementType::F32 && out == ElementType::S32)
                || (from.is_integer() && out.is_integer())
                || from == ElementType::Pred
                || out == ElementType::Pred
        }
        Op::BitcastConvert => args[0] != ElementType::Pred && out != ElementType::Pred,
        _ => false,
    }
}

/// Emits `op` applied to `args` (of element types `arg_tys`) producing element type `out`.
#[allow(clippy::too_many_arguments)]
pub fn emit_op(
    fb: &mut FunctionBuilder,
    lib: &Libcalls<'_>,
    has_fma: bool,
    op: &Op,
    out: ElementType,
    arg_tys: &[ElementType],
    args: &[Value],
    lanes: u32,
) -> Result<Value, JitError> {
    if is_low_precision(out) || arg_tys.iter().any(|&t| is_low_precision(t)) {
        return low_precision_op(fb, lib, has_fma, op, out, arg_tys, args, lanes);
    }
    if lanes > 1 && !has_vector_form(op, out, arg_tys) {
        let mut res = Vec::with_capacity(4);
        for l in 0..4u8 {
            let la: Vec<Value> = args
                .iter()
                .zip(arg_tys)
                .map(|(&a, &t)| extract_lane(fb, t, a, l))
                .collect();
            res.push(emit_op(fb, lib, has_fma, op, out, arg_tys, &la, 1)?);
        }
        return Ok(pack_lanes(fb, out, &res));
    }
    match op {
        Op::Unary(u) => unary(fb, lib, has_fma, *u, out, arg_tys[0], args[0], lanes),
        Op::Binary(b) => binary(fb, lib, *b, out, args[0], args[1], lanes),
        Op::Compare {
            direction,
            comparison_type,
        } => {
            let ct = comparison_type.unwrap_or_else(|| ComparisonType::default_for(arg_tys[0]));
            compare(fb, *direction, ct, arg_tys[0], args[0], args[1], lanes)
        }
        Op::Select => Ok(select_values(fb, args[0], args[1], args[2], lanes)),
        Op::Clamp => {
            let (lo, x, hi) = (args[0], args[1], args[2]);
            Ok(if out.is_float() {
                let t = fb.ins().fmax(x, lo);
                fb.ins().fmin(t, hi)
            } else if out.is_signed_int() {
                let t = fb.ins().smax(x, lo);
                fb.ins().smin(t, hi)
            } else {
                let t = fb.ins().umax(x, lo);
                fb.ins().umin(t, hi)
            })
        }
        Op::Copy => Ok(args[0]),
        Op::Convert => {
            if lanes == 1 {
                convert_scalar(fb, args[0], arg_tys[0], out)
            } else {
                convert_vector(fb, args[0], arg_tys[0], out)
            }
        }
        Op::BitcastConvert => {
            let from = arg_tys[0];
            if from.byte_size() != out.byte_size() {
                return Err(JitError::Unsupported(format!(
                    "bitcast-convert from {from} to {out} (different widths)"
                )));
            }
            let t = crate::jit::clif::types::value_type(out, lanes)?;
            let ft = fb.func.dfg.value_type(args[0]);
            if t == ft {
                return Ok(args[0]);
            }
            let fl = if lanes == 1 {
                MemFlagsData::new()
            } else {
                vflags()
            };
            Ok(fb.ins().bitcast(t, fl, args[0]))
        }
        other => Err(JitError::Unsupported(format!(
            "elementwise op {}",
            other.opcode_name()
        ))),
    }
}

/// An op on `bf16`/`f16` values (held as f32): computed in f32, the result rounded back to
/// its 16-bit type to nearest even, as XLA:CPU computes them (`docs/jit.md`).
#[allow(clippy::too_many_arguments)]
fn low_precision_op(
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
pub fn round_to(fb: &mut FunctionBuilder, lib: &Libcalls<'_>, x: Value, ty: ElementType) -> Value {
    let f = if ty == ElementType::BF16 {
        round_bf16 as *const () as usize
    } else {
        round_f16 as *const () as usize
    };
    lib.call(fb, f, types::F32, &[x])
}

/// A 16-bit float's bits (an `i16` loaded from memory) as the f32 of its value.
pub fn widen_bits(
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
pub fn narrow_bits(
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

fn float_libcall_f64(u: UnaryOp) -> Option<usize> {
    Some(match u {
        UnaryOp::Exp => exp_f64 as *const () as usize,
        UnaryOp::Expm1 => expm1_f64 as *const () as usize,
        UnaryOp::Log => log_f64 as *const () as usize,
        UnaryOp::Log1p => log1p_f64 as *const () as usize,
        UnaryOp::Tanh => tanh_f64 as *const () as usize,
        UnaryOp::Logistic => logistic_f64 as *const () as usize,
        UnaryOp::Sine => sin_f64 as *const () as usize,
        UnaryOp::Cosine => cos_f64 as *const () as usize,
        UnaryOp::Tan => tan_f64 as *const () as usize,
        UnaryOp::Cbrt => cbrt_f64 as *const () as usize,
        UnaryOp::Erf => erf_f64 as *const () as usize,
        _ => return None,
    })
}

#[allow(clippy::too_many_arguments)]
fn unary(
    fb: &mut FunctionBuilder,
    lib: &Libcalls<'_>,
    has_fma: bool,
    u: UnaryOp,
    out: ElementType,
    in_ty: ElementType,
    x: Value,
    lanes: u32,
) -> Result<Value, JitError> {
    use UnaryOp::*;
    if out == ElementType::F64 {
        if let Some(f) = float_libcall_f64(u) {
            return Ok(lib.call(fb, f, types::F64, &[x]));
        }
    }
    let is_f32 = out == ElementType::F32;
    Ok(match u {
        Abs if out.is_float() => fb.ins().fabs(x),
        Abs if out.is_signed_int() => fb.ins().iabs(x),
        Abs => x,
        Negate if out.is_float() => fb.ins().fneg(x),
        Negate => fb.ins().ineg(x),
        Exp if is_f32 => Vm::new(fb, lanes, has_fma).exp(x),
        Expm1 if is_f32 => Vm::new(fb, lanes, has_fma).expm1(x),
        Log if is_f32 => Vm::new(fb, lanes, has_fma).log(x),
        Log1p if is_f32 => Vm::new(fb, lanes, has_fma).log1p(x),
        Tanh if is_f32 => Vm::new(fb, lanes, has_fma).tanh(x),
        Logistic if is_f32 => Vm::new(fb, lanes, has_fma).logistic(x),
        Sine if is_f32 => Vm::new(fb, lanes, has_fma).sin_cos(x, false),
        Cosine if is_f32 => Vm::new(fb, lanes, has_fma).sin_cos(x, true),
        Rsqrt if is_f32 => Vm::new(fb, lanes, has_fma).rsqrt(x),
        Rsqrt if out == ElementType::F64 => {
            let s = fb.ins().sqrt(x);
            let one = fb.ins().f64const(1.0);
            fb.ins().fdiv(one, s)
        }
        Sqrt if out.is_float() => fb.ins().sqrt(x),
        Cbrt if is_f32 => lib.call(fb, cbrt_f32 as *const () as usize, types::F32, &[x]),
        Tan if is_f32 => lib.call(fb, tan_f32 as *const () as usize, types::F32, &[x]),
        Erf if is_f32 => lib.call(fb, erf_f32 as *const () as usize, types::F32, &[x]),
        Floor if out.is_float() => fb.ins().floor(x),
        Ceil if out.is_float() => fb.ins().ceil(x),
        RoundNearestEven if out.is_float() => fb.ins().nearest(x),
        RoundNearestAfz if out.is_float() => {
            let t = fb.ins().trunc(x);
            let d = fb.ins().fsub(x, t);
            let ad = fb.ins().fabs(d);
            let half = float_const(fb, out, 0.5, lanes);
            let one = float_const(fb, out, 1.0, lanes);
            let step = if out == ElementType::F32 {
                Vm::new(fb, lanes, false).copysign(one, x)
            } else {
                fb.ins().fcopysign(one, x)
            };
            let up = fb.ins().fadd(t, step);
            let c = fb.ins().fcmp(FloatCC::GreaterThanOrEqual, ad, half);
            select_values(fb, c, up, t, lanes)
        }
        Sign if out.is_float() => {
            let zero = float_const(fb, out, 0.0, lanes);
            let one = float_const(fb, out, 1.0, lanes);
            let s = if out == ElementType::F32 {
                Vm::new(fb, lanes, false).copysign(one, x)
            } else {
                fb.ins().fcopysign(one, x)
            };
            // Zero and NaN keep their value. `fcmp ueq` has no x86 vector lowering in
            // Cranelift, so it is `eq | uno`.
            let is_zero = fb.ins().fcmp(FloatCC::Equal, x, zero);
            let is_nan = fb.ins().fcmp(FloatCC::Unordered, x, x);
            let keep = fb.ins().bor(is_zero, is_nan);
            select_values(fb, keep, x, s, lanes)
        }
        Sign if out.is_signed_int() => {
            let t = fb.func.dfg.value_type(x);
            let one = fb.ins().iconst(t, 1);
            let m1 = fb.ins().iconst(t, -1);
            let a = fb.ins().smin(x, one);
            fb.ins().smax(a, m1)
        }
        Sign => {
            let t = fb.func.dfg.value_type(x);
            let nz = fb.ins().icmp_imm_s(IntCC::NotEqual, x, 0);
            let one = fb.ins().iconst(t, 1);
            let zero = fb.ins().iconst(t, 0);
            fb.ins().select(nz, one, zero)
        }
        Not if out == ElementType::Pred && lanes == 1 => fb.ins().bxor_imm_s(x, 1),
        Not if out.is_integer() || out == ElementType::Pred => fb.ins().bnot(x),
        IsFinite if in_ty.is_float() => {
            let a = fb.ins().fabs(x);
            let inf = float_const(fb, in_ty, f64::INFINITY, lanes);
            fb.ins().fcmp(FloatCC::LessThan, a, inf)
        }
        PopCnt if out.is_integer() => fb.ins().popcnt(x),
        Clz if out.is_integer() => fb.ins().clz(x),
        _ => return Err(JitError::Unsupported(format!("{} on {out}", u.name()))),
    })
}

fn float_const(fb: &mut FunctionBuilder, ty: ElementType, c: f64, lanes: u32) -> Value {
    if ty == ElementType::F64 {
        return fb.ins().f64const(c);
    }
    let s = fb.ins().f32const(c as f32);
    if lanes == 1 {
        s
    } else {
        fb.ins().splat(types::F32X4, s)
    }
}

fn binary(
    fb: &mut FunctionBuilder,
    lib: &Libcalls<'_>,
    b: BinaryOp,
    out: ElementType,
    x: Value,
    y: Value,
    lanes: u32,
) -> Result<Value, JitError> {
    use BinaryOp::*;
    let float = out.is_float();
    let signed = out.is_signed_int();
    let f32_or_64 = |f32fn: usize, f64fn: usize| {
        if out == ElementType::F32 {
            (f32fn, types::F32)
        } else {
            (f64fn, types::F64)
        }
    };
    Ok(match b {
        Add if float => fb.ins().fadd(x, y),
        Add => fb.ins().iadd(x, y),
        Subtract if float => fb.ins().fsub(x, y),
        Subtract => fb.ins().isub(x, y),
        Multiply if float => fb.ins().fmul(x, y),
        Multiply => fb.ins().imul(x, y),
        Divide if float => fb.ins().fdiv(x, y),
        Divide | Remainder if out == ElementType::Pred => {
            return Err(JitError::Unsupported(format!("{} on pred", b.name())))
        }
        Divide => int_div(fb, x, y, signed, false),
        Remainder if float => {
            let (f, t) = f32_or_64(
                fmod_f32 as *const () as usize,
                fmod_f64 as *const () as usize,
            );
            lib.call(fb, f, t, &[x, y])
        }
        Remainder => int_div(fb, x, y, signed, true),
        Maximum if float => fb.ins().fmax(x, y),
        Maximum if signed => fb.ins().smax(x, y),
        Maximum => fb.ins().umax(x, y),
        Minimum if float => fb.ins().fmin(x, y),
        Minimum if signed => fb.ins().smin(x, y),
        Minimum => fb.ins().umin(x, y),
        Power if float => {
            let (f, t) = f32_or_64(pow_f32 as *const () as usize, pow_f64 as *const () as usize);
            lib.call(fb, f, t, &[x, y])
        }
        Atan2 if float => {
            let (f, t) = f32_or_64(
                atan2_f32 as *const () as usize,
                atan2_f64 as *const () as usize,
            );
            lib.call(fb, f, t, &[x, y])
        }
        And if !float => fb.ins().band(x, y),
        Or if !float => fb.ins().bor(x, y),
        Xor if !float => fb.ins().bxor(x, y),
        ShiftLeft | ShiftRightLogical | ShiftRightArithmetic if !float && lanes == 1 => {
            shift_by_scalar(fb, b, x, y)
        }
        _ => return Err(JitError::Unsupported(format!("{} on {out}", b.name()))),
    })
}

/// `x` shifted by the scalar `amount` with XLA's results for an amount at or past the lane
/// width (unsigned): 0 for the logical shifts, the sign for the arithmetic one. `x` is a
/// scalar, or a vector whose lanes all shift by `amount` (a shift by a broadcast scalar:
/// Threefry's rotations), which SSE does with one shift by a count instead of lane by lane.
pub fn shift_by_scalar(fb: &mut FunctionBuilder, b: BinaryOp, x: Value, amount: Value) -> Value {
    let t = fb.func.dfg.value_type(x);
    let lane = t.lane_type();
    let w = lane.bits() as i64;
    let big = fb
        .ins()
        .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, amount, w);
    if b == BinaryOp::ShiftRightArithmetic {
        let amount_type = fb.func.dfg.value_type(amount);
        let wm1 = fb.ins().iconst(amount_type, w - 1);
        let amt = fb.ins().umin(amount, wm1);
        return fb.ins().sshr(x, amt);
    }
    let shifted = if b == BinaryOp::ShiftLeft {
        fb.ins().ishl(x, amount)
    } else {
        fb.ins().ushr(x, amount)
    };
    let zero = fb.ins().iconst(lane, 0);
    let zero = if t.is_vector() {
        fb.ins().splat(t, zero)
    } else {
        zero
    };
    fb.ins().select(big, zero, shifted)
}

/// Integer division / remainder with XLA's results where the hardware would trap:
/// x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0.
fn int_div(fb: &mut FunctionBuilder, x: Value, y: Value, signed: bool, rem: bool) -> Value {
    let t = fb.func.dfg.value_type(x);
    let one = fb.ins().iconst(t, 1);
    let is_zero = fb.ins().icmp_imm_s(IntCC::Equal, y, 0);
    if signed {
        let is_m1 = fb.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let bad = fb.ins().bor(is_zero, is_m1);
        let safe = fb.ins().select(bad, one, y);
        if rem {
            let r = fb.ins().srem(x, safe);
            let zero = fb.ins().iconst(t, 0);
            let r = fb.ins().select(is_m1, zero, r);
            fb.ins().select(is_zero, x, r)
        } else {
            let q = fb.ins().sdiv(x, safe);
            let neg = fb.ins().ineg(x);
            let q = fb.ins().select(is_m1, neg, q);
            let all = fb.ins().iconst(t, -1);
            fb.ins().select(is_zero, all, q)
        }
    } else {
        let safe = fb.ins().select(is_zero, one, y);
        if rem {
            let r = fb.ins().urem(x, safe);
            fb.ins().select(is_zero, x, r)
        } else {
            let q = fb.ins().udiv(x, safe);
            let all = fb.ins().iconst(t, -1);
            fb.ins().select(is_zero, all, q)
        }
    }
}

fn compare(
    fb: &mut FunctionBuilder,
    dir: ComparisonDirection,
    ct: ComparisonType,
    ty: ElementType,
    a: Value,
    b: Value,
    lanes: u32,
) -> Result<Value, JitError> {
    use ComparisonDirection::*;
    if ty.is_float() && ct != ComparisonType::TotalOrder {
        let cc = match dir {
            Eq => FloatCC::Equal,
            Ne => FloatCC::NotEqual,
            Lt => FloatCC::LessThan,
            Le => FloatCC::LessThanOrEqual,
            Gt => FloatCC::GreaterThan,
            Ge => FloatCC::GreaterThanOrEqual,
        };
        return Ok(fb.ins().fcmp(cc, a, b));
    }
    let (a, b, signed) = if ty.is_float() {
        // Total order: compare the bit patterns with negative values' magnitude bits flipped.
        let it = if lanes == 1 {
            if ty == ElementType::F64 {
                types::I64
            } else {
                types::I32
            }
        } else {
            types::I32X4
        };
        let fl = if lanes == 1 {
            MemFlagsData::new()
        } else {
            vflags()
        };
        let w = if it == types::I64 { 63 } else { 31 };
        let key = |fb: &mut FunctionBuilder, v: Value| {
            let bits = fb.ins().bitcast(it, fl, v);
            let s = fb.ins().sshr_imm_s(bits, w);
            let s = fb.ins().ushr_imm_s(s, 1);
            fb.ins().bxor(bits, s)
        };
        (key(fb, a), key(fb, b), true)
    } else {
        (a, b, ct == ComparisonType::Signed)
    };
    let cc = match (dir, signed) {
        (Eq, _) => IntCC::Equal,
        (Ne, _) => IntCC::NotEqual,
        (Lt, true) => IntCC::SignedLessThan,
        (Le, true) => IntCC::SignedLessThanOrEqual,
        (Gt, true) => IntCC::SignedGreaterThan,
        (Ge, true) => IntCC::SignedGreaterThanOrEqual,
        (Lt, false) => IntCC::UnsignedLessThan,
        (Le, false) => IntCC::UnsignedLessThanOrEqual,
        (Gt, false) => IntCC::UnsignedGreaterThan,
        (Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
    };
    Ok(fb.ins().icmp(cc, a, b))
}

/// Scalar conversion between element types with XLA's semantics.
pub fn convert_scalar(
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

fn convert_vector(
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
