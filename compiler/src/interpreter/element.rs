//! Typed access to array elements: one Rust type per element type, and the scalar form
//! used by conversions.

use crate::ir::{Array, ArrayData, ElementType};
use half::{bf16, f16};

use super::{EvalError, EvalResult};

/// One element in a form that converts to any element type with HLO's rules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Scalar {
    Bool(bool),
    Int(i128),
    Float(f64),
}

/// A Rust type that stores the elements of one [`ElementType`].
pub(crate) trait Elem: Copy + PartialEq + Send + Sync + std::fmt::Debug + 'static {
    const TYPE: ElementType;
    fn slice(data: &ArrayData) -> Option<&[Self]>;
    fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]>;
    fn wrap(v: Vec<Self>) -> ArrayData;
    fn to_scalar(self) -> Scalar;
    /// HLO's `convert`: integers wrap, floats to integers truncate toward zero and saturate
    /// (NaN gives 0), anything to `pred` is `!= 0`.
    fn from_scalar(s: Scalar) -> Self;
}

macro_rules! impl_int_elem {
    ($t:ty, $variant:ident) => {
        impl Elem for $t {
            const TYPE: ElementType = ElementType::$variant;
            fn slice(data: &ArrayData) -> Option<&[Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> ArrayData {
                ArrayData::$variant(v)
            }
            fn to_scalar(self) -> Scalar {
                Scalar::Int(self as i128)
            }
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::Bool(b) => b as $t,
                    Scalar::Int(i) => i as $t,
                    // Rust's float-to-int `as` saturates and maps NaN to 0, as HLO does.
                    Scalar::Float(f) => f as $t,
                }
            }
        }
    };
}

impl_int_elem!(i8, S8);
impl_int_elem!(u8, U8);
impl_int_elem!(i16, S16);
impl_int_elem!(u16, U16);
impl_int_elem!(i32, S32);
impl_int_elem!(u32, U32);
impl_int_elem!(i64, S64);
impl_int_elem!(u64, U64);

macro_rules! impl_float_elem {
    ($t:ty, $variant:ident, $to:expr, $from:expr, $from_int:expr) => {
        impl Elem for $t {
            const TYPE: ElementType = ElementType::$variant;
            fn slice(data: &ArrayData) -> Option<&[Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> ArrayData {
                ArrayData::$variant(v)
            }
            fn to_scalar(self) -> Scalar {
                #[allow(clippy::redundant_closure_call)]
                Scalar::Float(($to)(self))
            }
            fn from_scalar(s: Scalar) -> Self {
                #[allow(clippy::redundant_closure_call)]
                match s {
                    Scalar::Bool(b) => ($from)(b as u8 as f64),
                    Scalar::Int(i) => ($from_int)(i),
                    Scalar::Float(f) => ($from)(f),
                }
            }
        }
    };
}

// Integers round once to the nearest float (ties to even); for the half types through f64,
// which is exact for every integer that does not overflow them anyway.
impl_float_elem!(f32, F32, |x: f32| x as f64, |f: f64| f as f32, |i: i128| i
    as f32);
impl_float_elem!(f64, F64, |x: f64| x, |f: f64| f, |i: i128| i as f64);
impl_float_elem!(f16, F16, |x: f16| x.to_f64(), f16::from_f64, |i: i128| {
    f16::from_f64(i as f64)
});
impl_float_elem!(
    bf16,
    BF16,
    |x: bf16| x.to_f64(),
    bf16::from_f64,
    |i: i128| { bf16::from_f64(i as f64) }
);

impl Elem for bool {
    const TYPE: ElementType = ElementType::Pred;
    fn slice(data: &ArrayData) -> Option<&[Self]> {
        match data {
            ArrayData::Pred(v) => Some(v),
            _ => None,
        }
    }
    fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]> {
        match data {
            ArrayData::Pred(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<Self>) -> ArrayData {
        ArrayData::Pred(v)
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
        }
    }
}

/// Runs `$body` with the type alias `$T` bound to the Rust type of element type `$ty`.
macro_rules! for_each_type {
    ($ty:expr, $T:ident => $body:expr) => {
        match $ty {
            $crate::ir::ElementType::Pred => {
                type $T = bool;
                $body
            }
            $crate::ir::ElementType::S8 => {
                type $T = i8;
                $body
            }
            $crate::ir::ElementType::U8 => {
                type $T = u8;
                $body
            }
            $crate::ir::ElementType::S16 => {
                type $T = i16;
                $body
            }
            $crate::ir::ElementType::U16 => {
                type $T = u16;
                $body
            }
            $crate::ir::ElementType::S32 => {
                type $T = i32;
                $body
            }
            $crate::ir::ElementType::U32 => {
                type $T = u32;
                $body
            }
            $crate::ir::ElementType::S64 => {
                type $T = i64;
                $body
            }
            $crate::ir::ElementType::U64 => {
                type $T = u64;
                $body
            }
            $crate::ir::ElementType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::ir::ElementType::BF16 => {
                type $T = half::bf16;
                $body
            }
            $crate::ir::ElementType::F32 => {
                type $T = f32;
                $body
            }
            $crate::ir::ElementType::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}
pub(crate) use for_each_type;

/// The elements of `a` as `&[T]`; an error if `a` holds another type.
pub(crate) fn typed<T: Elem>(a: &Array) -> EvalResult<&[T]> {
    T::slice(&a.data).ok_or_else(|| {
        EvalError::new(format!(
            "expected {} elements, found {}",
            T::TYPE,
            a.element_type()
        ))
    })
}

/// The elements of `a` as `&mut [T]`; an error if `a` holds another type.
pub(crate) fn typed_mut<T: Elem>(a: &mut Array) -> EvalResult<&mut [T]> {
    let found = a.element_type();
    T::slice_mut(&mut a.data)
        .ok_or_else(|| EvalError::new(format!("expected {} elements, found {found}", T::TYPE)))
}

/// A scalar (rank-0) value as an integer index (any integer type).
pub(crate) fn index_scalar(a: &Array) -> EvalResult<i64> {
    if !a.element_type().is_integer() || a.len() != 1 {
        return Err(EvalError::new(format!(
            "expected a scalar integer index, found {}",
            a.shape
        )));
    }
    Ok(a.data.get_i64(0))
}
