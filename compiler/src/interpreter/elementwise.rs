//! Elementwise ops: unary, binary, compare, select, clamp.
//!
//! Float semantics follow XLA: `maximum`/`minimum` propagate NaN, `remainder` is C's `fmod`,
//! `round-nearest-even` rounds ties to even. Half types (f16, bf16) compute each op in f32
//! and round the result back, as XLA:CPU does. Integer semantics follow HLO exactly:
//! wrapping arithmetic, `x / 0 = -1` (all bits set), `x % 0 = x`, `MIN / -1 = MIN`,
//! shifts by an amount >= the bit width give 0 (logical) or the sign fill (arithmetic).

use super::element::{for_each_type, typed, typed_mut, Elem};
use super::{err, EvalResult};
use crate::ir::{
    Array, ArrayData, BinaryOp, ComparisonDirection, ComparisonType, ElementType, UnaryOp,
};
use half::{bf16, f16};
use num_traits::Float;

/// Element types with arithmetic: each op as a plain function, looked up once per array.
pub(crate) trait Arith: Elem {
    fn binary_fn(op: BinaryOp) -> Option<fn(Self, Self) -> Self>;
    fn unary_fn(op: UnaryOp) -> Option<fn(Self) -> Self>;
    /// `total_order` selects the IEEE total order for floats (`type=TOTALORDER`).
    fn compare(a: Self, b: Self, direction: ComparisonDirection, total_order: bool) -> bool;
    fn is_finite(self) -> bool;
}

fn ordered<T: PartialOrd>(a: T, b: T, direction: ComparisonDirection) -> bool {
    use ComparisonDirection::*;
    match direction {
        Eq => a == b,
        Ne => a != b,
        Lt => a < b,
        Le => a <= b,
        Gt => a > b,
        Ge => a >= b,
    }
}

fn total_ordered(a: std::cmp::Ordering, direction: ComparisonDirection) -> bool {
    use std::cmp::Ordering::*;
    use ComparisonDirection::*;
    match direction {
        Eq => a == Equal,
        Ne => a != Equal,
        Lt => a == Less,
        Le => a != Greater,
        Gt => a == Greater,
        Ge => a != Less,
    }
}

// ---- floats -------------------------------------------------------------------------------

/// `maximum`: NaN if either operand is NaN.
pub(crate) fn fmax<F: Float>(x: F, y: F) -> F {
    if x.is_nan() || y.is_nan() {
        F::nan()
    } else if x >= y {
        x
    } else {
        y
    }
}

/// `minimum`: NaN if either operand is NaN.
pub(crate) fn fmin<F: Float>(x: F, y: F) -> F {
    if x.is_nan() || y.is_nan() {
        F::nan()
    } else if x <= y {
        x
    } else {
        y
    }
}

/// Round half to even.
pub(crate) fn round_even<F: Float>(x: F) -> F {
    let r = x.round();
    let half = F::from(0.5).unwrap();
    let two = F::from(2.0).unwrap();
    if (x - x.trunc()).abs() == half {
        two * (x / two).round()
    } else {
        r
    }
}

fn fsign<F: Float>(x: F) -> F {
    if x.is_nan() || x == F::zero() {
        x
    } else {
        x.signum()
    }
}

/// The error function per precision: Rust's standard library has none, so `libm`'s (the
/// Rust port of musl's, within an ulp or so).
pub(crate) trait ErrorFunction {
    fn erf(self) -> Self;
}

impl ErrorFunction for f32 {
    fn erf(self) -> f32 {
        libm::erff(self)
    }
}

impl ErrorFunction for f64 {
    fn erf(self) -> f64 {
        libm::erf(self)
    }
}

fn logistic<F: Float>(x: F) -> F {
    F::one() / (F::one() + (-x).exp())
}

fn id<T>(x: T) -> T {
    x
}

/// Implements [`Arith`] for a float type `$t` computed in the working type `$w`.
macro_rules! impl_float_arith {
    ($t:ty, $w:ty, $to:path, $from:path) => {
        impl Arith for $t {
            fn binary_fn(op: BinaryOp) -> Option<fn(Self, Self) -> Self> {
                use BinaryOp::*;
                Some(match op {
                    Add => |x, y| $from($to(x) + $to(y)),
                    Subtract => |x, y| $from($to(x) - $to(y)),
                    Multiply => |x, y| $from($to(x) * $to(y)),
                    Divide => |x, y| $from($to(x) / $to(y)),
                    Remainder => |x, y| $from($to(x) % $to(y)),
                    Maximum => |x, y| $from(fmax::<$w>($to(x), $to(y))),
                    Minimum => |x, y| $from(fmin::<$w>($to(x), $to(y))),
                    Power => |x, y| $from(<$w>::powf($to(x), $to(y))),
                    Atan2 => |x, y| $from(<$w>::atan2($to(x), $to(y))),
                    And | Or | Xor | ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => {
                        return None
                    }
                })
            }
            fn unary_fn(op: UnaryOp) -> Option<fn(Self) -> Self> {
                use UnaryOp::*;
                Some(match op {
                    Abs => |x| $from(<$w>::abs($to(x))),
                    Negate => |x| $from(-$to(x)),
                    Exp => |x| $from(<$w>::exp($to(x))),
                    Expm1 => |x| $from(<$w>::exp_m1($to(x))),
                    Log => |x| $from(<$w>::ln($to(x))),
                    Log1p => |x| $from(<$w>::ln_1p($to(x))),
                    Tanh => |x| $from(<$w>::tanh($to(x))),
                    Logistic => |x| $from(logistic::<$w>($to(x))),
                    Sqrt => |x| $from(<$w>::sqrt($to(x))),
                    Rsqrt => |x| $from(1.0 / <$w>::sqrt($to(x))),
                    Cbrt => |x| $from(<$w>::cbrt($to(x))),
                    Floor => |x| $from(<$w>::floor($to(x))),
                    Ceil => |x| $from(<$w>::ceil($to(x))),
                    RoundNearestEven => |x| $from(round_even::<$w>($to(x))),
                    RoundNearestAfz => |x| $from(<$w>::round($to(x))),
                    Sign => |x| $from(fsign::<$w>($to(x))),
                    Sine => |x| $from(<$w>::sin($to(x))),
                    Cosine => |x| $from(<$w>::cos($to(x))),
                    Tan => |x| $from(<$w>::tan($to(x))),
                    Erf => |x| $from(<$w as ErrorFunction>::erf($to(x))),
                    Real => |x| x,
                    Imag => |_| $from(0.0),
                    Not | PopCnt | Clz | IsFinite => return None,
                })
            }
            fn compare(a: Self, b: Self, direction: ComparisonDirection, total: bool) -> bool {
                if total {
                    total_ordered(<$w>::total_cmp(&$to(a), &$to(b)), direction)
                } else {
                    ordered($to(a), $to(b), direction)
                }
            }
            fn is_finite(self) -> bool {
                $to(self).is_finite()
            }
        }
    };
}

impl_float_arith!(f32, f32, id, id);
impl_float_arith!(f64, f64, id, id);
impl_float_arith!(f16, f32, f16::to_f32, f16::from_f32);
impl_float_arith!(bf16, f32, bf16::to_f32, bf16::from_f32);

// ---- integers -----------------------------------------------------------------------------

/// Integer ops with HLO's rules for the cases C leaves undefined.
macro_rules! impl_int_arith {
    ($t:ty, $u:ty, $s:ty, $signed:expr) => {
        impl Arith for $t {
            fn binary_fn(op: BinaryOp) -> Option<fn(Self, Self) -> Self> {
                use BinaryOp::*;
                const BITS: u128 = <$t>::BITS as u128;
                Some(match op {
                    Add => |x: $t, y: $t| x.wrapping_add(y),
                    Subtract => |x: $t, y: $t| x.wrapping_sub(y),
                    Multiply => |x: $t, y: $t| x.wrapping_mul(y),
                    // x / 0 is -1 (all bits set); MIN / -1 wraps to MIN.
                    Divide => |x: $t, y: $t| if y == 0 { !0 } else { x.wrapping_div(y) },
                    // x % 0 is x; MIN % -1 is 0.
                    Remainder => |x: $t, y: $t| if y == 0 { x } else { x.wrapping_rem(y) },
                    Maximum => |x: $t, y: $t| x.max(y),
                    Minimum => |x: $t, y: $t| x.min(y),
                    Power => int_pow,
                    And => |x: $t, y: $t| x & y,
                    Or => |x: $t, y: $t| x | y,
                    Xor => |x: $t, y: $t| x ^ y,
                    // The shift amount is read as unsigned: a negative amount is a huge one.
                    ShiftLeft => |x: $t, y: $t| {
                        if (y as $u as u128) < BITS {
                            ((x as $u) << (y as $u as u32)) as $t
                        } else {
                            0
                        }
                    },
                    ShiftRightLogical => |x: $t, y: $t| {
                        if (y as $u as u128) < BITS {
                            ((x as $u) >> (y as $u as u32)) as $t
                        } else {
                            0
                        }
                    },
                    ShiftRightArithmetic => |x: $t, y: $t| {
                        let amount = y as $u as u128;
                        let amount = if amount < BITS { amount } else { BITS - 1 };
                        ((x as $s) >> (amount as u32)) as $t
                    },
                    Atan2 => return None,
                })
            }
            fn unary_fn(op: UnaryOp) -> Option<fn(Self) -> Self> {
                use UnaryOp::*;
                Some(match op {
                    Abs => |x: $t| {
                        if $signed {
                            (x as $s).wrapping_abs() as $t
                        } else {
                            x
                        }
                    },
                    Negate => |x: $t| x.wrapping_neg(),
                    Sign => |x: $t| {
                        if $signed {
                            (x as $s).signum() as $t
                        } else {
                            x.min(1)
                        }
                    },
                    Not => |x: $t| !x,
                    PopCnt => |x: $t| x.count_ones() as $t,
                    Clz => |x: $t| x.leading_zeros() as $t,
                    Real => |x: $t| x,
                    Imag => |_| 0,
                    _ => return None,
                })
            }
            fn compare(a: Self, b: Self, direction: ComparisonDirection, _: bool) -> bool {
                ordered(a, b, direction)
            }
            fn is_finite(self) -> bool {
                true
            }
        }
    };
}

impl_int_arith!(i8, u8, i8, true);
impl_int_arith!(u8, u8, i8, false);
impl_int_arith!(i16, u16, i16, true);
impl_int_arith!(u16, u16, i16, false);
impl_int_arith!(i32, u32, i32, true);
impl_int_arith!(u32, u32, i32, false);
impl_int_arith!(i64, u64, i64, true);
impl_int_arith!(u64, u64, i64, false);

/// Integer power by squaring, wrapping. A negative exponent gives 1 for a base of 1, the
/// sign for a base of -1, and 0 otherwise (the truncated exact result).
fn int_pow<T>(base: T, exp: T) -> T
where
    T: num_traits::PrimInt + num_traits::WrappingMul + num_traits::Zero + num_traits::One,
{
    let zero = T::zero();
    let one = T::one();
    if exp < zero {
        if base == one {
            return one;
        }
        // base == -1 only exists for signed types; (-1)^e is -1 when e is odd.
        if base == !zero {
            return if exp & one == one { base } else { one };
        }
        return zero;
    }
    let mut result = one;
    let mut b = base;
    let mut e = exp;
    while e > zero {
        if e & one == one {
            result = result.wrapping_mul(&b);
        }
        b = b.wrapping_mul(&b);
        e = e >> 1;
    }
    result
}

// ---- pred ---------------------------------------------------------------------------------

impl Arith for bool {
    fn binary_fn(op: BinaryOp) -> Option<fn(Self, Self) -> Self> {
        use BinaryOp::*;
        Some(match op {
            And | Minimum | Multiply => |x, y| x & y,
            Or | Maximum | Add => |x, y| x | y,
            Xor => |x, y| x ^ y,
            _ => return None,
        })
    }
    fn unary_fn(op: UnaryOp) -> Option<fn(Self) -> Self> {
        match op {
            UnaryOp::Not => Some(|x: bool| !x),
            UnaryOp::Real | UnaryOp::Abs | UnaryOp::Sign => Some(|x| x),
            _ => None,
        }
    }
    fn compare(a: Self, b: Self, direction: ComparisonDirection, _: bool) -> bool {
        ordered(a, b, direction)
    }
    fn is_finite(self) -> bool {
        true
    }
}

// ---- array ops ----------------------------------------------------------------------------

fn same_dims(what: &str, a: &Array, b: &Array) -> EvalResult<()> {
    if a.shape.dims != b.shape.dims || a.element_type() != b.element_type() {
        return err(format!(
            "{what} needs operands of one shape, got {} and {}",
            a.shape, b.shape
        ));
    }
    Ok(())
}

pub(crate) fn unary(op: UnaryOp, a: &Array) -> EvalResult<Array> {
    let ty = a.element_type();
    if op == UnaryOp::IsFinite {
        let out: Vec<bool> =
            for_each_type!(ty, T => typed::<T>(a)?.iter().map(|x| x.is_finite()).collect());
        return Ok(Array::new(
            a.shape.with_element_type(ElementType::Pred),
            ArrayData::Pred(out),
        ));
    }
    let data = for_each_type!(ty, T => {
        let f = T::unary_fn(op).ok_or_else(|| {
            super::EvalError::new(format!("{} is not defined on {ty}", op.name()))
        })?;
        T::wrap(typed::<T>(a)?.iter().map(|&x| f(x)).collect())
    });
    Ok(Array::new(a.shape.clone(), data))
}

pub(crate) fn binary(op: BinaryOp, a: &Array, b: &Array) -> EvalResult<Array> {
    same_dims(op.name(), a, b)?;
    let ty = a.element_type();
    let data = for_each_type!(ty, T => {
        let f = binary_fn::<T>(op)?;
        let (x, y) = (typed::<T>(a)?, typed::<T>(b)?);
        T::wrap(x.iter().zip(y).map(|(&x, &y)| f(x, y)).collect())
    });
    Ok(Array::new(a.shape.clone(), data))
}

/// `acc = op(acc, x)` in place (`op(x, acc)` when `swapped`): bitwise what [`binary`] gives,
/// without a new array (a collective's running sum reuses its buffer).
pub(crate) fn binary_assign(
    op: BinaryOp,
    acc: &mut Array,
    x: &Array,
    swapped: bool,
) -> EvalResult<()> {
    same_dims(op.name(), acc, x)?;
    for_each_type!(acc.element_type(), T => {
        let f = binary_fn::<T>(op)?;
        let y = typed::<T>(x)?;
        let a = typed_mut::<T>(acc)?;
        if swapped {
            a.iter_mut().zip(y).for_each(|(a, &y)| *a = f(y, *a));
        } else {
            a.iter_mut().zip(y).for_each(|(a, &y)| *a = f(*a, y));
        }
    });
    Ok(())
}

/// `dst`'s elements become `src`'s (same shape and type, else an error), in `dst`'s storage.
pub(crate) fn copy_into(dst: &mut Array, src: &Array) -> EvalResult<()> {
    same_dims("copy", dst, src)?;
    for_each_type!(src.element_type(), T => {
        typed_mut::<T>(dst)?.copy_from_slice(typed::<T>(src)?);
    });
    Ok(())
}

/// The function of a binary op on `T`, or an error naming op and type.
pub(crate) fn binary_fn<T: Arith>(op: BinaryOp) -> EvalResult<fn(T, T) -> T> {
    T::binary_fn(op).ok_or_else(|| {
        super::EvalError::new(format!("{} is not defined on {}", op.name(), T::TYPE))
    })
}

pub(crate) fn compare(
    direction: ComparisonDirection,
    comparison_type: Option<ComparisonType>,
    a: &Array,
    b: &Array,
) -> EvalResult<Array> {
    same_dims("compare", a, b)?;
    let total = comparison_type == Some(ComparisonType::TotalOrder);
    let out: Vec<bool> = for_each_type!(a.element_type(), T => {
        let (x, y) = (typed::<T>(a)?, typed::<T>(b)?);
        x.iter().zip(y).map(|(&x, &y)| T::compare(x, y, direction, total)).collect()
    });
    Ok(Array::new(
        a.shape.with_element_type(ElementType::Pred),
        ArrayData::Pred(out),
    ))
}

/// `select(pred, on_true, on_false)`; `pred` may be a scalar.
pub(crate) fn select(pred: &Array, on_true: &Array, on_false: &Array) -> EvalResult<Array> {
    same_dims("select", on_true, on_false)?;
    let p = typed::<bool>(pred)?;
    if pred.shape.rank() != 0 && pred.shape.dims != on_true.shape.dims {
        return err(format!(
            "select's predicate {} does not match its operands {}",
            pred.shape, on_true.shape
        ));
    }
    let data = for_each_type!(on_true.element_type(), T => {
        let (x, y) = (typed::<T>(on_true)?, typed::<T>(on_false)?);
        let out: Vec<T> = if p.len() == 1 {
            if p[0] { x.to_vec() } else { y.to_vec() }
        } else {
            p.iter().zip(x.iter().zip(y)).map(|(&p, (&x, &y))| if p { x } else { y }).collect()
        };
        T::wrap(out)
    });
    Ok(Array::new(on_true.shape.clone(), data))
}

/// `clamp(min, x, max)` = `minimum(maximum(x, min), max)`; `min` and `max` may be scalars.
pub(crate) fn clamp(lo: &Array, x: &Array, hi: &Array) -> EvalResult<Array> {
    for (name, bound) in [("min", lo), ("max", hi)] {
        if bound.element_type() != x.element_type()
            || (bound.shape.rank() != 0 && bound.shape.dims != x.shape.dims)
        {
            return err(format!(
                "clamp's {name} {} does not fit its operand {}",
                bound.shape, x.shape
            ));
        }
    }
    let data = for_each_type!(x.element_type(), T => {
        let max = binary_fn::<T>(BinaryOp::Maximum)?;
        let min = binary_fn::<T>(BinaryOp::Minimum)?;
        let (l, v, h) = (typed::<T>(lo)?, typed::<T>(x)?, typed::<T>(hi)?);
        let at = |s: &[T], i: usize| if s.len() == 1 { s[0] } else { s[i] };
        T::wrap(v.iter().enumerate().map(|(i, &e)| min(max(e, at(l, i)), at(h, i))).collect())
    });
    Ok(Array::new(x.shape.clone(), data))
}
