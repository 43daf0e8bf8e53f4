//! Literal values: constants in the IR and the values the interpreter computes.

use super::element_type::ElementType;
use super::shape::{ArrayShape, Shape};
use half::{bf16, f16};

/// Typed storage for the elements of an array, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum ArrayData {
    Pred(Vec<bool>),
    S8(Vec<i8>),
    U8(Vec<u8>),
    S16(Vec<i16>),
    U16(Vec<u16>),
    S32(Vec<i32>),
    U32(Vec<u32>),
    S64(Vec<i64>),
    U64(Vec<u64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Runs `$body` with `$v` bound to the typed vector inside an [`ArrayData`], whatever its type.
#[macro_export]
macro_rules! with_array_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::ir::ArrayData::Pred($v) => $body,
            $crate::ir::ArrayData::S8($v) => $body,
            $crate::ir::ArrayData::U8($v) => $body,
            $crate::ir::ArrayData::S16($v) => $body,
            $crate::ir::ArrayData::U16($v) => $body,
            $crate::ir::ArrayData::S32($v) => $body,
            $crate::ir::ArrayData::U32($v) => $body,
            $crate::ir::ArrayData::S64($v) => $body,
            $crate::ir::ArrayData::U64($v) => $body,
            $crate::ir::ArrayData::F16($v) => $body,
            $crate::ir::ArrayData::BF16($v) => $body,
            $crate::ir::ArrayData::F32($v) => $body,
            $crate::ir::ArrayData::F64($v) => $body,
        }
    };
}

impl ArrayData {
    pub fn element_type(&self) -> ElementType {
        use ArrayData::*;
        match self {
            Pred(_) => ElementType::Pred,
            S8(_) => ElementType::S8,
            U8(_) => ElementType::U8,
            S16(_) => ElementType::S16,
            U16(_) => ElementType::U16,
            S32(_) => ElementType::S32,
            U32(_) => ElementType::U32,
            S64(_) => ElementType::S64,
            U64(_) => ElementType::U64,
            F16(_) => ElementType::F16,
            BF16(_) => ElementType::BF16,
            F32(_) => ElementType::F32,
            F64(_) => ElementType::F64,
        }
    }

    pub fn len(&self) -> usize {
        with_array_data!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` zeros of type `ty`.
    pub fn zeros(ty: ElementType, n: usize) -> ArrayData {
        Self::from_f64_fn(ty, n, |_| 0.0)
    }

    /// Builds data of type `ty` from values given as f64 (exact for every type up to 32 bits).
    pub fn from_f64_fn(ty: ElementType, n: usize, f: impl Fn(usize) -> f64) -> ArrayData {
        use ArrayData as D;
        match ty {
            ElementType::Pred => D::Pred((0..n).map(|i| f(i) != 0.0).collect()),
            ElementType::S8 => D::S8((0..n).map(|i| f(i) as i8).collect()),
            ElementType::U8 => D::U8((0..n).map(|i| f(i) as u8).collect()),
            ElementType::S16 => D::S16((0..n).map(|i| f(i) as i16).collect()),
            ElementType::U16 => D::U16((0..n).map(|i| f(i) as u16).collect()),
            ElementType::S32 => D::S32((0..n).map(|i| f(i) as i32).collect()),
            ElementType::U32 => D::U32((0..n).map(|i| f(i) as u32).collect()),
            ElementType::S64 => D::S64((0..n).map(|i| f(i) as i64).collect()),
            ElementType::U64 => D::U64((0..n).map(|i| f(i) as u64).collect()),
            ElementType::F16 => D::F16((0..n).map(|i| f16::from_f64(f(i))).collect()),
            ElementType::BF16 => D::BF16((0..n).map(|i| bf16::from_f64(f(i))).collect()),
            ElementType::F32 => D::F32((0..n).map(|i| f(i) as f32).collect()),
            ElementType::F64 => D::F64((0..n).map(f).collect()),
        }
    }

    /// Element `i` as f64 (exact for every type except 64-bit integers beyond 2^53).
    pub fn get_f64(&self, i: usize) -> f64 {
        use ArrayData::*;
        match self {
            Pred(v) => v[i] as u8 as f64,
            S8(v) => v[i] as f64,
            U8(v) => v[i] as f64,
            S16(v) => v[i] as f64,
            U16(v) => v[i] as f64,
            S32(v) => v[i] as f64,
            U32(v) => v[i] as f64,
            S64(v) => v[i] as f64,
            U64(v) => v[i] as f64,
            F16(v) => v[i].to_f64(),
            BF16(v) => v[i].to_f64(),
            F32(v) => v[i] as f64,
            F64(v) => v[i],
        }
    }

    /// Element `i` as i64 bits-preserving for integers (u64 reinterpreted), truncated for floats.
    pub fn get_i64(&self, i: usize) -> i64 {
        use ArrayData::*;
        match self {
            Pred(v) => v[i] as i64,
            S8(v) => v[i] as i64,
            U8(v) => v[i] as i64,
            S16(v) => v[i] as i64,
            U16(v) => v[i] as i64,
            S32(v) => v[i] as i64,
            U32(v) => v[i] as i64,
            S64(v) => v[i],
            U64(v) => v[i] as i64,
            other => other.get_f64(i) as i64,
        }
    }

    /// Little-endian bytes of all elements (`pred` as one byte 0/1), the safetensors layout.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        use ArrayData::*;
        match self {
            Pred(v) => v.iter().map(|&b| b as u8).collect(),
            S8(v) => v.iter().map(|&x| x as u8).collect(),
            U8(v) => v.clone(),
            S16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            S32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            S64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// Parses little-endian bytes; `None` when the length is not a whole number of elements.
    pub fn from_le_bytes(ty: ElementType, bytes: &[u8]) -> Option<ArrayData> {
        let w = ty.byte_size();
        if !bytes.len().is_multiple_of(w) {
            return None;
        }
        macro_rules! le {
            ($t:ty) => {
                bytes
                    .chunks_exact(w)
                    .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                    .collect()
            };
        }
        use ArrayData as D;
        Some(match ty {
            ElementType::Pred => D::Pred(bytes.iter().map(|&b| b != 0).collect()),
            ElementType::S8 => D::S8(bytes.iter().map(|&b| b as i8).collect()),
            ElementType::U8 => D::U8(bytes.to_vec()),
            ElementType::S16 => D::S16(le!(i16)),
            ElementType::U16 => D::U16(le!(u16)),
            ElementType::S32 => D::S32(le!(i32)),
            ElementType::U32 => D::U32(le!(u32)),
            ElementType::S64 => D::S64(le!(i64)),
            ElementType::U64 => D::U64(le!(u64)),
            ElementType::F16 => D::F16(le!(f16)),
            ElementType::BF16 => D::BF16(le!(bf16)),
            ElementType::F32 => D::F32(le!(f32)),
            ElementType::F64 => D::F64(le!(f64)),
        })
    }
}

/// An array value: a static shape and its elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub shape: ArrayShape,
    pub data: ArrayData,
}

/// Why [`Array::try_new`] refused a shape and its data.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArrayError {
    #[error("the shape is {shape_type:?} but the data holds {data_type:?} values")]
    WrongType {
        shape_type: ElementType,
        data_type: ElementType,
    },
    #[error("dims {dims:?} are not static (an array needs every dimension known and >= 0)")]
    NotStatic { dims: Vec<i64> },
    #[error("dims {dims:?} hold more elements than the host can address")]
    TooLarge { dims: Vec<i64> },
    #[error("dims {dims:?} need {expected} values, the data has {found}")]
    WrongLength {
        dims: Vec<i64>,
        expected: usize,
        found: usize,
    },
}

impl Array {
    /// Builds an array from data that may not fit its shape (data read from files, user
    /// input): a mismatch is an error naming the dims and the counts, never a panic.
    pub fn try_new(shape: ArrayShape, data: ArrayData) -> Result<Array, ArrayError> {
        let dims = || shape.dims.to_vec();
        if shape.element_type != data.element_type() {
            return Err(ArrayError::WrongType {
                shape_type: shape.element_type,
                data_type: data.element_type(),
            });
        }
        if !shape.is_static() || shape.dims.iter().any(|&d| d < 0) {
            return Err(ArrayError::NotStatic { dims: dims() });
        }
        let expected = shape
            .dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
            .filter(|_| shape.checked_byte_size().is_some())
            .ok_or_else(|| ArrayError::TooLarge { dims: dims() })?;
        if expected != data.len() {
            return Err(ArrayError::WrongLength {
                dims: dims(),
                expected,
                found: data.len(),
            });
        }
        Ok(Array { shape, data })
    }

    /// Builds an array; panics if the element count or type does not match the shape
    /// (a programming error inside the compiler, never a user error: data that comes from
    /// outside goes through [`Array::try_new`]).
    pub fn new(shape: ArrayShape, data: ArrayData) -> Array {
        assert_eq!(shape.element_type, data.element_type(), "array data type");
        assert_eq!(
            shape.element_count() as usize,
            data.len(),
            "array data length"
        );
        Array { shape, data }
    }

    pub fn zeros(shape: ArrayShape) -> Array {
        let data = ArrayData::zeros(shape.element_type, shape.element_count() as usize);
        Array { shape, data }
    }

    pub fn scalar_f32(x: f32) -> Array {
        Array::new(
            ArrayShape::scalar(ElementType::F32),
            ArrayData::F32(vec![x]),
        )
    }

    pub fn scalar_s32(x: i32) -> Array {
        Array::new(
            ArrayShape::scalar(ElementType::S32),
            ArrayData::S32(vec![x]),
        )
    }

    pub fn f32(dims: &[i64], values: Vec<f32>) -> Array {
        Array::new(
            ArrayShape::new(ElementType::F32, dims),
            ArrayData::F32(values),
        )
    }

    pub fn element_type(&self) -> ElementType {
        self.shape.element_type
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Any value: an array, a tuple of values, or a token.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Array(Array),
    Tuple(Vec<Literal>),
    Token,
}

impl Literal {
    pub fn shape(&self) -> Shape {
        match self {
            Literal::Array(a) => Shape::Array(a.shape.clone()),
            Literal::Tuple(t) => Shape::Tuple(t.iter().map(|l| l.shape()).collect()),
            Literal::Token => Shape::Token,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Literal::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn into_array(self) -> Option<Array> {
        match self {
            Literal::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_tuple(&self) -> Option<&[Literal]> {
        match self {
            Literal::Tuple(t) => Some(t),
            _ => None,
        }
    }

    /// Array leaves depth-first, the order JAX flattens a tuple result in.
    pub fn leaves(&self) -> Vec<&Array> {
        let mut out = Vec::new();
        fn walk<'a>(l: &'a Literal, out: &mut Vec<&'a Array>) {
            match l {
                Literal::Array(a) => out.push(a),
                Literal::Tuple(t) => t.iter().for_each(|l| walk(l, out)),
                Literal::Token => {}
            }
        }
        walk(self, &mut out);
        out
    }
}

impl From<Array> for Literal {
    fn from(a: Array) -> Literal {
        Literal::Array(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_new_refuses_data_that_does_not_fit_the_shape() {
        let image = |n| ArrayData::U8(vec![0; n]);
        let shape = ArrayShape::new(ElementType::U8, &[28, 28]);
        let a = Array::try_new(shape.clone(), image(784)).unwrap();
        assert_eq!(a.len(), 784);
        let e = Array::try_new(shape.clone(), image(729)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "dims [28, 28] need 784 values, the data has 729"
        );
        let e = Array::try_new(shape, ArrayData::F32(vec![0.0; 784])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the shape is U8 but the data holds F32 values"
        );
        let e = Array::try_new(ArrayShape::new(ElementType::U8, &[-1, 2]), image(2)).unwrap_err();
        assert!(matches!(e, ArrayError::NotStatic { .. }), "{e}");
        let huge = ArrayShape::new(ElementType::F32, &[i64::MAX, 4]);
        let e = Array::try_new(huge, ArrayData::F32(vec![])).unwrap_err();
        assert!(matches!(e, ArrayError::TooLarge { .. }), "{e}");
        let scalar = Array::try_new(
            ArrayShape::scalar(ElementType::S32),
            ArrayData::S32(vec![3]),
        );
        assert_eq!(scalar.unwrap(), Array::scalar_s32(3));
    }
}
