//! Shapes: arrays with static (or, for legality diagnostics, dynamic) dimensions, tuples, token.

use super::element_type::ElementType;
use smallvec::SmallVec;
use std::fmt;

pub type Dims = SmallVec<[i64; 4]>;

/// Marker stored in [`ArrayShape::dims`] for a dimension whose size is unknown (`?` in text).
pub(crate) const UNKNOWN_DIM: i64 = -1;

/// An array shape. The IR is row-major; layouts in HLO text are accepted and dropped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayShape {
    pub element_type: ElementType,
    /// Dimension sizes. A dynamic dimension holds its bound (`<=N`) or [`UNKNOWN_DIM`] (`?`).
    pub dims: Dims,
    /// One flag per dimension: true when the dimension is dynamic. Empty means all static.
    pub dynamic: SmallVec<[bool; 4]>,
}

impl ArrayShape {
    pub fn new(element_type: ElementType, dims: &[i64]) -> Self {
        ArrayShape {
            element_type,
            dims: dims.iter().copied().collect(),
            dynamic: SmallVec::new(),
        }
    }

    pub fn scalar(element_type: ElementType) -> Self {
        Self::new(element_type, &[])
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    pub(crate) fn is_dynamic_dim(&self, d: usize) -> bool {
        self.dynamic.get(d).copied().unwrap_or(false)
    }

    pub fn is_static(&self) -> bool {
        !self.dynamic.iter().any(|&d| d)
    }

    /// Number of elements (dynamic dimensions count at their bound; unknown counts as 0).
    pub fn element_count(&self) -> i64 {
        self.dims.iter().map(|&d| d.max(0)).product()
    }

    pub fn byte_size(&self) -> i64 {
        self.element_count() * self.element_type.byte_size() as i64
    }

    /// The byte size, or `None` when it does not fit in an `i64` (the verifier rejects such
    /// shapes, so [`Self::byte_size`] never wraps on a verified module).
    pub fn checked_byte_size(&self) -> Option<i64> {
        self.dims
            .iter()
            .try_fold(self.element_type.byte_size() as i64, |n, &d| {
                n.checked_mul(d.max(0))
            })
    }

    pub fn with_element_type(&self, element_type: ElementType) -> Self {
        ArrayShape {
            element_type,
            ..self.clone()
        }
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Dims {
        let mut strides: Dims = SmallVec::from_elem(1, self.dims.len());
        for i in (0..self.dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.dims[i + 1].max(0);
        }
        strides
    }

    /// Shapes equal ignoring the element type.
    pub fn same_dims(&self, other: &ArrayShape) -> bool {
        self.dims == other.dims && self.dynamic_mask() == other.dynamic_mask()
    }

    fn dynamic_mask(&self) -> SmallVec<[bool; 4]> {
        (0..self.rank()).map(|d| self.is_dynamic_dim(d)).collect()
    }
}

/// The shape of any value: an array, a tuple of shapes, or a token.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    Array(ArrayShape),
    Tuple(Vec<Shape>),
    Token,
}

impl Shape {
    pub fn array(element_type: ElementType, dims: &[i64]) -> Shape {
        Shape::Array(ArrayShape::new(element_type, dims))
    }

    pub fn scalar(element_type: ElementType) -> Shape {
        Shape::Array(ArrayShape::scalar(element_type))
    }

    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_tuple(&self) -> Option<&[Shape]> {
        match self {
            Shape::Tuple(t) => Some(t),
            _ => None,
        }
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Shape::Array(_))
    }

    pub(crate) fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }

    pub(crate) fn is_token(&self) -> bool {
        matches!(self, Shape::Token)
    }

    /// The element type of an array shape.
    pub fn element_type(&self) -> Option<ElementType> {
        self.as_array().map(|a| a.element_type)
    }

    pub fn dims(&self) -> &[i64] {
        self.as_array().map(|a| &a.dims[..]).unwrap_or(&[])
    }

    pub fn rank(&self) -> usize {
        self.dims().len()
    }

    /// The array leaves of this shape, depth-first (the order JAX flattens outputs in).
    pub fn leaves(&self) -> Vec<&ArrayShape> {
        let mut out = Vec::new();
        fn walk<'a>(s: &'a Shape, out: &mut Vec<&'a ArrayShape>) {
            match s {
                Shape::Array(a) => out.push(a),
                Shape::Tuple(t) => t.iter().for_each(|s| walk(s, out)),
                Shape::Token => {}
            }
        }
        walk(self, &mut out);
        out
    }

    /// Total bytes of all array leaves.
    pub fn byte_size(&self) -> i64 {
        self.leaves().iter().map(|a| a.byte_size()).sum()
    }

    /// Text without layouts: `f32[2,3]`, `(s32[], f32[4])`.
    pub fn to_text(&self, with_layout: bool) -> String {
        let mut s = String::new();
        write_shape(&mut s, self, with_layout);
        s
    }
}

fn write_shape(out: &mut String, shape: &Shape, with_layout: bool) {
    use std::fmt::Write;
    match shape {
        Shape::Token => out.push_str("token[]"),
        Shape::Tuple(elems) => {
            out.push('(');
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_shape(out, e, with_layout);
            }
            out.push(')');
        }
        Shape::Array(a) => {
            let _ = write!(out, "{}[", a.element_type);
            for (i, &d) in a.dims.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if a.is_dynamic_dim(i) {
                    if d == UNKNOWN_DIM {
                        out.push('?');
                    } else {
                        let _ = write!(out, "<={d}");
                    }
                } else {
                    let _ = write!(out, "{d}");
                }
            }
            out.push(']');
            if with_layout && a.rank() > 0 {
                out.push('{');
                for i in (0..a.rank()).rev() {
                    let _ = write!(out, "{i}");
                    if i > 0 {
                        out.push(',');
                    }
                }
                out.push('}');
            }
        }
    }
}

impl fmt::Display for Shape {
    /// HLO text with the default (row-major) layout, as XLA prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text(true))
    }
}

impl fmt::Display for ArrayShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Shape::Array(self.clone()).to_text(true))
    }
}
