//! Transcendental functions as straight-line CLIF: the same code serves `f32` (one lane) and
//! `f32x4` (four lanes). Each is a range reduction, a short polynomial and branch-free fix-ups
//! for the special inputs (0, -0, subnormals, ±inf, NaN, overflow, underflow).
//!
//! The polynomial coefficients are the classic single-precision minimax sets (the ones Cephes
//! published); measured errors in ulps are in `docs/jit.md` and checked by
//! `tests/tests/jit/vector_math.rs`.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, Endianness, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

/// Emits float math for one lane (`f32`) or four (`f32x4`).
pub(crate) struct Vm<'a, 'f> {
    pub fb: &'a mut FunctionBuilder<'f>,
    pub lanes: u32,
    /// The host has FMA: `fma` is one instruction.
    pub has_fma: bool,
}

impl<'a, 'f> Vm<'a, 'f> {
    pub(crate) fn new(fb: &'a mut FunctionBuilder<'f>, lanes: u32, has_fma: bool) -> Self {
        Vm { fb, lanes, has_fma }
    }

    fn fty(&self) -> Type {
        if self.lanes == 1 {
            types::F32
        } else {
            types::F32X4
        }
    }

    fn ity(&self) -> Type {
        if self.lanes == 1 {
            types::I32
        } else {
            types::I32X4
        }
    }

    pub(crate) fn f(&mut self, c: f32) -> Value {
        let s = self.fb.ins().f32const(c);
        if self.lanes == 1 {
            s
        } else {
            self.fb.ins().splat(types::F32X4, s)
        }
    }

    pub(crate) fn i(&mut self, c: i32) -> Value {
        let s = self.fb.ins().iconst(types::I32, c as i64);
        if self.lanes == 1 {
            s
        } else {
            self.fb.ins().splat(types::I32X4, s)
        }
    }

    fn flags(&self) -> MemFlagsData {
        if self.lanes == 1 {
            MemFlagsData::new()
        } else {
            MemFlagsData::new().with_endianness(Endianness::Little)
        }
    }

    pub(crate) fn bits(&mut self, x: Value) -> Value {
        let (t, fl) = (self.ity(), self.flags());
        self.fb.ins().bitcast(t, fl, x)
    }

    pub(crate) fn float_of_bits(&mut self, x: Value) -> Value {
        let (t, fl) = (self.fty(), self.flags());
        self.fb.ins().bitcast(t, fl, x)
    }

    /// A float comparison as a condition usable by [`Vm::sel`].
    pub(crate) fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.fb.ins().fcmp(cc, a, b)
    }

    pub(crate) fn icmp(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        self.fb.ins().icmp(cc, a, b)
    }

    /// `cond ? a : b` for a condition from [`Vm::fcmp`] / [`Vm::icmp`] (or their `band`/`bor`).
    pub(crate) fn sel(&mut self, cond: Value, a: Value, b: Value) -> Value {
        if self.lanes == 1 {
            self.fb.ins().select(cond, a, b)
        } else {
            let ty = self.fb.func.dfg.value_type(a);
            let c = if ty == types::I32X4 {
                cond
            } else {
                let fl = self.flags();
                self.fb.ins().bitcast(ty, fl, cond)
            };
            self.fb.ins().bitselect(c, a, b)
        }
    }

    /// `a * b + c`.
    pub(crate) fn fma(&mut self, a: Value, b: Value, c: Value) -> Value {
        if self.has_fma {
            self.fb.ins().fma(a, b, c)
        } else {
            let p = self.fb.ins().fmul(a, b);
            self.fb.ins().fadd(p, c)
        }
    }

    /// Horner evaluation of `coeffs[0] * x^(n-1) + ... + coeffs[n-1]`.
    fn poly(&mut self, x: Value, coeffs: &[f32]) -> Value {
        let mut acc = self.f(coeffs[0]);
        for &c in &coeffs[1..] {
            let cv = self.f(c);
            acc = self.fma(acc, x, cv);
        }
        acc
    }

    /// `2^k` for an integer vector `k` in [-126, 127].
    fn pow2i(&mut self, k: Value) -> Value {
        let bias = self.i(127);
        let e = self.fb.ins().iadd(k, bias);
        let sh = self.fb.ins().ishl_imm_s(e, 23);
        self.float_of_bits(sh)
    }

    /// `x * 2^n` for `n` in [-252, 254], in two steps so that neither factor leaves the normal
    /// range (the result may still overflow to inf or underflow to a subnormal or zero).
    fn scale(&mut self, x: Value, n: Value) -> Value {
        let n1 = self.fb.ins().sshr_imm_s(n, 1);
        let n2 = self.fb.ins().isub(n, n1);
        let s1 = self.pow2i(n1);
        let s2 = self.pow2i(n2);
        let t = self.fb.ins().fmul(x, s1);
        self.fb.ins().fmul(t, s2)
    }

    fn float_to_int(&mut self, x: Value) -> Value {
        let t = self.ity();
        self.fb.ins().fcvt_to_sint_sat(t, x)
    }

    /// Splits `x` as `n * ln2 + r`, |r| <= ln2/2; returns (n as int, r).
    fn reduce_ln2(&mut self, x: Value) -> (Value, Value) {
        let log2e = self.f(std::f32::consts::LOG2_E);
        let t = self.fb.ins().fmul(x, log2e);
        let nf = self.fb.ins().nearest(t);
        let n = self.float_to_int(nf);
        let neg_hi = self.f(-0.693_359_4);
        let neg_lo = self.f(2.121_944_4e-4);
        let r = self.fma(nf, neg_hi, x);
        let r = self.fma(nf, neg_lo, r);
        (n, r)
    }

    /// `e^r - 1 - r` over the reduced range, as `r^2 * q(r)`.
    fn exp_tail(&mut self, r: Value) -> Value {
        let q = self.poly(
            r,
            &[
                1.987_569_1e-4,
                1.398_2e-3,
                8.333_452e-3,
                4.166_579_6e-2,
                1.666_666_5e-1,
                5e-1,
            ],
        );
        let r2 = self.fb.ins().fmul(r, r);
        self.fb.ins().fmul(r2, q)
    }

    pub(crate) fn exp(&mut self, x: Value) -> Value {
        // Clamping keeps n in range; out there the result is already inf or 0.
        let hi = self.f(89.0);
        let lo = self.f(-104.0);
        let xc = self.fb.ins().fmin(x, hi);
        let xc = self.fb.ins().fmax(xc, lo);
        let (n, r) = self.reduce_ln2(xc);
        let tail = self.exp_tail(r);
        let one = self.f(1.0);
        let p = self.fb.ins().fadd(r, tail);
        let p = self.fb.ins().fadd(p, one);
        self.scale(p, n)
    }

    pub(crate) fn expm1(&mut self, x: Value) -> Value {
        let hi = self.f(89.0);
        let lo = self.f(-30.0);
        let xc = self.fb.ins().fmin(x, hi);
        let xc = self.fb.ins().fmax(xc, lo);
        let (n, r) = self.reduce_ln2(xc);
        let tail = self.exp_tail(r);
        let em = self.fb.ins().fadd(r, tail);
        // Small n: 2^n * em + (2^n - 1), exact in the subtraction. Large n: (1 + em) * 2^n - 1.
        let one = self.f(1.0);
        let n1 = self.fb.ins().sshr_imm_s(n, 1);
        let n2 = self.fb.ins().isub(n, n1);
        let s1 = self.pow2i(n1);
        let s2 = self.pow2i(n2);
        let s = self.fb.ins().fmul(s1, s2);
        let sm1 = self.fb.ins().fsub(s, one);
        let small = self.fma(em, s, sm1);
        let onep = self.fb.ins().fadd(one, em);
        let big = self.fb.ins().fmul(onep, s1);
        let big = self.fb.ins().fmul(big, s2);
        let big = self.fb.ins().fsub(big, one);
        let limit = self.i(24);
        let is_big = self.icmp(IntCC::SignedGreaterThan, n, limit);
        let res = self.sel(is_big, big, small);
        // Keeps the sign of zero.
        let zero = self.f(0.0);
        let is_zero = self.fcmp(FloatCC::Equal, x, zero);
        self.sel(is_zero, x, res)
    }

    pub(crate) fn log(&mut self, x: Value) -> Value {
        // Subnormals: scale into the normal range first.
        let min_normal = self.f(f32::MIN_POSITIVE);
        let is_sub = self.fcmp(FloatCC::LessThan, x, min_normal);
        let two23 = self.f(8_388_608.0);
        let xs = self.fb.ins().fmul(x, two23);
        let xn = self.sel(is_sub, xs, x);
        let adj_sub = self.i(-23);
        let adj_none = self.i(0);
        let adj = self.sel(is_sub, adj_sub, adj_none);
        let bits = self.bits(xn);
        let exp_bits = self.fb.ins().ushr_imm_s(bits, 23);
        let mask = self.i(0xff);
        let exp_bits = self.fb.ins().band(exp_bits, mask);
        let bias = self.i(126);
        let e = self.fb.ins().isub(exp_bits, bias);
        let e = self.fb.ins().iadd(e, adj);
        let mant_mask = self.i(0x807f_ffff_u32 as i32);
        let half_bits = self.i(0x3f00_0000);
        let m = self.fb.ins().band(bits, mant_mask);
        let m = self.fb.ins().bor(m, half_bits);
        let m = self.float_of_bits(m); // in [0.5, 1)
        let sqrt_half = self.f(std::f32::consts::FRAC_1_SQRT_2);
        let below = self.fcmp(FloatCC::LessThan, m, sqrt_half);
        let one_i = self.i(1);
        let e_minus = self.fb.ins().isub(e, one_i);
        let e = self.sel(below, e_minus, e);
        let one = self.f(1.0);
        let m2 = self.fb.ins().fadd(m, m);
        let m2 = self.fb.ins().fsub(m2, one);
        let m1 = self.fb.ins().fsub(m, one);
        let m = self.sel(below, m2, m1);
        let ef = if self.lanes == 1 {
            self.fb.ins().fcvt_from_sint(types::F32, e)
        } else {
            self.fb.ins().fcvt_from_sint(types::F32X4, e)
        };
        let z = self.fb.ins().fmul(m, m);
        let p = self.poly(
            m,
            &[
                7.037_683_6e-2,
                -1.151_461e-1,
                1.167_699_9e-1,
                -1.242_014_1e-1,
                1.424_932_3e-1,
                -1.666_805_8e-1,
                2.000_071_4e-1,
                -2.499_999_4e-1,
                3.333_333e-1,
            ],
        );
        let y = self.fb.ins().fmul(m, z);
        let y = self.fb.ins().fmul(y, p);
        let c_lo = self.f(-2.121_944_4e-4);
        let y = self.fma(ef, c_lo, y);
        let mhalf = self.f(-0.5);
        let y = self.fma(z, mhalf, y);
        let r = self.fb.ins().fadd(m, y);
        let c_hi = self.f(0.693_359_4);
        let r = self.fma(ef, c_hi, r);
        // Special inputs.
        let zero = self.f(0.0);
        let inf = self.f(f32::INFINITY);
        let ninf = self.f(f32::NEG_INFINITY);
        let nan = self.f(f32::NAN);
        let is_inf = self.fcmp(FloatCC::Equal, x, inf);
        let r = self.sel(is_inf, inf, r);
        let is_zero = self.fcmp(FloatCC::Equal, x, zero);
        let r = self.sel(is_zero, ninf, r);
        let is_bad = self.fcmp(FloatCC::UnorderedOrLessThan, x, zero);
        self.sel(is_bad, nan, r)
    }

    pub(crate) fn log1p(&mut self, x: Value) -> Value {
        // log1p(x) = log(u) * x / (u - 1) with u = 1 + x rounded: the division corrects the
        // rounding of u (Goldberg's trick).
        let one = self.f(1.0);
        let u = self.fb.ins().fadd(one, x);
        let lu = self.log(u);
        let um1 = self.fb.ins().fsub(u, one);
        let q = self.fb.ins().fdiv(x, um1);
        let r = self.fb.ins().fmul(lu, q);
        let u_is_one = self.fcmp(FloatCC::Equal, u, one);
        let r = self.sel(u_is_one, x, r);
        let inf = self.f(f32::INFINITY);
        let is_inf = self.fcmp(FloatCC::Equal, x, inf);
        self.sel(is_inf, inf, r)
    }

    pub(crate) fn tanh(&mut self, x: Value) -> Value {
        let ax = self.fb.ins().fabs(x);
        // Small |x|: odd polynomial.
        let z = self.fb.ins().fmul(x, x);
        let p = self.poly(
            z,
            &[
                -5.704_988_7e-3,
                2.063_909e-2,
                -5.373_971_6e-2,
                1.333_144_2e-1,
                -3.333_328e-1,
            ],
        );
        let pz = self.fb.ins().fmul(p, z);
        let small = self.fma(pz, x, x);
        // Large |x|: 1 - 2 / (e^(2|x|) + 1), with the sign of x.
        let two = self.f(2.0);
        let one = self.f(1.0);
        let a2 = self.fb.ins().fmul(ax, two);
        let e = self.exp(a2);
        let d = self.fb.ins().fadd(e, one);
        let q = self.fb.ins().fdiv(two, d);
        let big = self.fb.ins().fsub(one, q);
        let big = self.copysign(big, x);
        let thresh = self.f(0.625);
        let is_small = self.fcmp(FloatCC::LessThan, ax, thresh);
        self.sel(is_small, small, big)
    }

    pub(crate) fn logistic(&mut self, x: Value) -> Value {
        // With e = exp(-|x|) <= 1 nothing overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below.
        let one = self.f(1.0);
        let ax = self.fb.ins().fabs(x);
        let nx = self.fb.ins().fneg(ax);
        let e = self.exp(nx);
        let d = self.fb.ins().fadd(one, e);
        let zero = self.f(0.0);
        let pos = self.fcmp(FloatCC::GreaterThanOrEqual, x, zero);
        let num = self.sel(pos, one, e);
        self.fb.ins().fdiv(num, d)
    }

    /// sin (`cos == false`) or cos of `x`: reduction by pi/2 in three parts, then the quadrant
    /// picks the sine or cosine polynomial and the sign.
    pub(crate) fn sin_cos(&mut self, x: Value, cos: bool) -> Value {
        let two_over_pi = self.f(std::f32::consts::FRAC_2_PI);
        let t = self.fb.ins().fmul(x, two_over_pi);
        let jf = self.fb.ins().nearest(t);
        let j = self.float_to_int(jf);
        let dp1 = self.f(-1.570_312_5);
        let dp2 = self.f(-4.837_513e-4);
        let dp3 = self.f(-7.549_79e-8);
        let r = self.fma(jf, dp1, x);
        let r = self.fma(jf, dp2, r);
        let r = self.fma(jf, dp3, r);
        let z = self.fb.ins().fmul(r, r);
        let ps = self.poly(z, &[-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1]);
        let ps = self.fb.ins().fmul(ps, z);
        let sinp = self.fma(ps, r, r);
        let pc = self.poly(z, &[2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2]);
        let z2 = self.fb.ins().fmul(z, z);
        let mhalf = self.f(-0.5);
        let one = self.f(1.0);
        let c = self.fma(z, mhalf, one);
        let cosp = self.fma(pc, z2, c);
        let q = if cos {
            let one_i = self.i(1);
            self.fb.ins().iadd(j, one_i)
        } else {
            j
        };
        let one_i = self.i(1);
        let swap = self.fb.ins().band(q, one_i);
        let zero_i = self.i(0);
        let use_cos = self.icmp(IntCC::NotEqual, swap, zero_i);
        let v = self.sel(use_cos, cosp, sinp);
        // Quadrants 2 and 3 flip the sign: bit 1 of q moved to the sign bit.
        let two_i = self.i(2);
        let neg = self.fb.ins().band(q, two_i);
        let neg = self.fb.ins().ishl_imm_s(neg, 30);
        let vb = self.bits(v);
        let vb = self.fb.ins().bxor(vb, neg);
        let res = self.float_of_bits(vb);
        if cos {
            res
        } else {
            let zero = self.f(0.0);
            let is_zero = self.fcmp(FloatCC::Equal, x, zero);
            self.sel(is_zero, x, res)
        }
    }

    /// The magnitude of `mag` with the sign of `sign` (x64 has no 4-lane `fcopysign`).
    pub(crate) fn copysign(&mut self, mag: Value, sign: Value) -> Value {
        if self.lanes == 1 {
            return self.fb.ins().fcopysign(mag, sign);
        }
        let m = self.bits(mag);
        let s = self.bits(sign);
        let abs_mask = self.i(0x7fff_ffff);
        let sign_mask = self.i(i32::MIN);
        let m = self.fb.ins().band(m, abs_mask);
        let s = self.fb.ins().band(s, sign_mask);
        let r = self.fb.ins().bor(m, s);
        self.float_of_bits(r)
    }

    pub(crate) fn rsqrt(&mut self, x: Value) -> Value {
        let s = self.fb.ins().sqrt(x);
        let one = self.f(1.0);
        self.fb.ins().fdiv(one, s)
    }
}
