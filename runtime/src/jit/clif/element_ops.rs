//! One elementwise op on CLIF values, scalar or 4-lane, with HLO's semantics (integer division
//! by zero, shifts past the bit width, NaN-propagating max/min, saturating float-to-int).
//! An op with no 4-lane form here is applied lane by lane.

use super::convert::{convert_scalar, convert_vector};
use super::lane_values::{extract_lane, pack_lanes, select_values, vflags};
use super::low_precision::low_precision_op;
use crate::jit::clif::symbols::Symbols;
use crate::jit::clif::types::is_low_precision;
use crate::jit::clif::vector_math::Vm;
use crate::jit::JitError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, MemFlagsData, Signature, Type, Value};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;
use tessel_compiler::ir::{
    BinaryOp, ComparisonDirection, ComparisonType, ElementType, Op, UnaryOp,
};

/// Rust functions the generated code calls for operations with no CLIF form here.
pub(crate) struct Libcalls<'a> {
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
libfn!(cos_f64, f64, |a| a.cos());

impl Libcalls<'_> {
    pub(super) fn call(
        &self,
        fb: &mut FunctionBuilder,
        f: usize,
        ty: Type,
        args: &[Value],
    ) -> Value {
        self.call_typed(fb, f, ty, ty, args)
    }

    /// Calls `f(args: param) -> ret`.
    pub(super) fn call_typed(
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
pub(crate) fn emit_op(
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
pub(crate) fn shift_by_scalar(
    fb: &mut FunctionBuilder,
    b: BinaryOp,
    x: Value,
    amount: Value,
) -> Value {
    let t = fb.func.dfg.value_type(x);
    let lane = t.lane_type();
    let w = lane.bits() as i64;
    if let Some(n) = constant_amount(fb, amount) {
        // A constant amount (Threefry's rotations): the shift alone, or its known result.
        let amount_type = fb.func.dfg.value_type(amount);
        let by = |fb: &mut FunctionBuilder, k: u64| fb.ins().iconst(amount_type, k as i64);
        return match b {
            BinaryOp::ShiftRightArithmetic => {
                let k = by(fb, n.min(w as u64 - 1));
                fb.ins().sshr(x, k)
            }
            _ if n >= w as u64 => {
                let zero = fb.ins().iconst(lane, 0);
                if t.is_vector() {
                    fb.ins().splat(t, zero)
                } else {
                    zero
                }
            }
            BinaryOp::ShiftLeft => {
                let k = by(fb, n);
                fb.ins().ishl(x, k)
            }
            _ => {
                let k = by(fb, n);
                fb.ins().ushr(x, k)
            }
        };
    }
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

/// The value of `v`, unsigned in its type's width, when it is an `iconst`.
fn constant_amount(fb: &FunctionBuilder, v: Value) -> Option<u64> {
    use cranelift_codegen::ir::{InstructionData, Opcode, ValueDef};
    let ValueDef::Result(inst, _) = fb.func.dfg.value_def(v) else {
        return None;
    };
    let InstructionData::UnaryImm {
        opcode: Opcode::Iconst,
        imm,
    } = fb.func.dfg.insts[inst]
    else {
        return None;
    };
    let bits = fb.func.dfg.value_type(v).bits();
    let raw = imm.bits() as u64;
    Some(if bits < 64 {
        raw & ((1u64 << bits) - 1)
    } else {
        raw
    })
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
