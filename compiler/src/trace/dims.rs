//! Dimensions at trace time: fixed sizes or sizes unknown until run time (a `None` batch in TF).

use crate::ir::{ArrayShape, ElementType, UNKNOWN_DIM};
use std::fmt;

/// One dimension of a traced tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Fixed(i64),
    /// Not known when tracing (e.g. the batch of a dataset without `drop_remainder`). Kept in
    /// the module as a dynamic dimension (`?`) so that the legality check can point at it.
    Unknown,
}

impl Dim {
    pub fn fixed(self) -> Option<i64> {
        match self {
            Dim::Fixed(n) => Some(n),
            Dim::Unknown => None,
        }
    }

    pub fn is_unknown(self) -> bool {
        self == Dim::Unknown
    }
}

impl From<i64> for Dim {
    fn from(n: i64) -> Dim {
        Dim::Fixed(n)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// Anything that lists dimensions: `&[Dim]`, `&[i64]`, arrays and vectors of either.
pub trait IntoDims {
    fn into_dims(self) -> Vec<Dim>;
}

impl IntoDims for &[Dim] {
    fn into_dims(self) -> Vec<Dim> {
        self.to_vec()
    }
}

impl IntoDims for &[i64] {
    fn into_dims(self) -> Vec<Dim> {
        self.iter().map(|&n| Dim::Fixed(n)).collect()
    }
}

impl<const N: usize> IntoDims for &[Dim; N] {
    fn into_dims(self) -> Vec<Dim> {
        self.to_vec()
    }
}

impl<const N: usize> IntoDims for &[i64; N] {
    fn into_dims(self) -> Vec<Dim> {
        self.iter().map(|&n| Dim::Fixed(n)).collect()
    }
}

impl IntoDims for Vec<Dim> {
    fn into_dims(self) -> Vec<Dim> {
        self
    }
}

impl IntoDims for Vec<i64> {
    fn into_dims(self) -> Vec<Dim> {
        self.into_iter().map(Dim::Fixed).collect()
    }
}

/// The IR shape for traced dimensions: unknown dimensions become dynamic `?` dimensions.
pub(super) fn array_shape(ty: ElementType, dims: &[Dim]) -> ArrayShape {
    let mut shape = ArrayShape::new(
        ty,
        &dims
            .iter()
            .map(|d| d.fixed().unwrap_or(UNKNOWN_DIM))
            .collect::<Vec<_>>(),
    );
    if dims.iter().any(|d| d.is_unknown()) {
        shape.dynamic = dims.iter().map(|d| d.is_unknown()).collect();
    }
    shape
}

/// The traced dimensions of an IR shape (any dynamic dimension counts as unknown).
pub(crate) fn dims_of(shape: &ArrayShape) -> Vec<Dim> {
    (0..shape.rank())
        .map(|i| {
            if shape.is_dynamic_dim(i) {
                Dim::Unknown
            } else {
                Dim::Fixed(shape.dims[i])
            }
        })
        .collect()
}

/// `f32[?,784]`: a shape as the tracing API shows it in messages.
pub(super) fn describe(shape: &ArrayShape) -> String {
    let dims: Vec<String> = dims_of(shape).iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", shape.element_type, dims.join(","))
}

/// Numpy broadcasting of two dimension lists (aligned at the right). An unknown dimension
/// against 1 or another unknown stays unknown; against a fixed size n > 1 it is also kept
/// unknown (the sizes can only be checked at run time).
pub(crate) fn broadcast_dims(a: &[Dim], b: &[Dim]) -> Option<Vec<Dim>> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let da = dim_from_right(a, rank - 1 - i);
        let db = dim_from_right(b, rank - 1 - i);
        out.push(match (da, db) {
            (Dim::Fixed(x), Dim::Fixed(y)) if x == y => Dim::Fixed(x),
            (Dim::Fixed(1), d) | (d, Dim::Fixed(1)) => d,
            (Dim::Unknown, _) | (_, Dim::Unknown) => Dim::Unknown,
            _ => return None,
        });
    }
    Some(out)
}

/// Dimension `k` counting from the right; missing leading dimensions are 1.
fn dim_from_right(dims: &[Dim], k: usize) -> Dim {
    if k < dims.len() {
        dims[dims.len() - 1 - k]
    } else {
        Dim::Fixed(1)
    }
}

/// Resolves a possibly negative axis against `rank`.
pub(crate) fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        let f = Dim::Fixed;
        assert_eq!(
            broadcast_dims(&[f(4), f(1)], &[f(3)]),
            Some(vec![f(4), f(3)])
        );
        assert_eq!(
            broadcast_dims(&[Dim::Unknown, f(10)], &[f(10)]),
            Some(vec![Dim::Unknown, f(10)])
        );
        assert_eq!(broadcast_dims(&[f(2), f(3)], &[f(4)]), None);
        assert_eq!(broadcast_dims(&[], &[f(5)]), Some(vec![f(5)]));
    }

    #[test]
    fn unknown_dims_become_dynamic_ir_dims() {
        let s = array_shape(ElementType::F32, &[Dim::Unknown, Dim::Fixed(784)]);
        assert_eq!(s.to_string(), "f32[?,784]{1,0}");
        assert_eq!(dims_of(&s), vec![Dim::Unknown, Dim::Fixed(784)]);
        assert_eq!(describe(&s), "f32[?,784]");
        assert!(array_shape(ElementType::F32, &[Dim::Fixed(2)]).is_static());
    }

    #[test]
    fn axes_may_count_from_the_end() {
        assert_eq!(normalize_axis(-1, 3), Some(2));
        assert_eq!(normalize_axis(3, 3), None);
        assert_eq!(normalize_axis(-4, 3), None);
    }
}
