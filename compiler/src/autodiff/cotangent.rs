//! Cotangents: the gradient flowing back into one value, for arrays and tuples.

use super::emit::{Emitter, R};
use crate::ir::{InstrId, Shape};

/// The cotangent of one value. Tuples keep one cotangent per element so that a gradient can
/// reach one element of a loop state or call result without materializing the others.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cot {
    /// No gradient (zeros).
    Zero,
    /// An instruction holding the gradient (array- or tuple-shaped).
    Value(InstrId),
    /// One cotangent per tuple element.
    Tuple(Vec<Cot>),
}

impl Cot {
    pub(crate) fn is_zero(&self) -> bool {
        match self {
            Cot::Zero => true,
            Cot::Value(_) => false,
            Cot::Tuple(parts) => parts.iter().all(Cot::is_zero),
        }
    }

    /// Drops the parts that belong to non-float values, which carry no gradient.
    pub(crate) fn prune(self, shape: &Shape) -> Cot {
        match (self, shape) {
            (Cot::Zero, _) => Cot::Zero,
            (c, Shape::Array(a)) => {
                if a.element_type.is_float() {
                    c
                } else {
                    Cot::Zero
                }
            }
            (Cot::Tuple(parts), Shape::Tuple(shapes)) => Cot::Tuple(
                parts
                    .into_iter()
                    .zip(shapes)
                    .map(|(p, s)| p.prune(s))
                    .collect(),
            ),
            (c, _) => c,
        }
    }
}

/// The cotangents of the `n` elements of a tuple-shaped value.
pub(crate) fn split(em: &mut Emitter, c: Cot, n: usize) -> R<Vec<Cot>> {
    match c {
        Cot::Zero => Ok(vec![Cot::Zero; n]),
        Cot::Tuple(parts) => Ok(parts),
        Cot::Value(id) => (0..n).map(|i| Ok(Cot::Value(em.gte(id, i)?))).collect(),
    }
}

/// `a + b`.
pub(crate) fn accumulate(em: &mut Emitter, a: Cot, b: Cot) -> R<Cot> {
    match (a, b) {
        (Cot::Zero, x) | (x, Cot::Zero) => Ok(x),
        (Cot::Value(x), Cot::Value(y)) if em.shape(x).is_array() => Ok(Cot::Value(em.add(x, y)?)),
        (x, y) => {
            let n = match (&x, &y) {
                (Cot::Tuple(p), _) | (_, Cot::Tuple(p)) => p.len(),
                (Cot::Value(id), _) => em.shape(*id).as_tuple().map_or(0, |t| t.len()),
                _ => 0,
            };
            let xs = split(em, x, n)?;
            let ys = split(em, y, n)?;
            let sum = xs
                .into_iter()
                .zip(ys)
                .map(|(p, q)| accumulate(em, p, q))
                .collect::<R<Vec<_>>>()?;
            Ok(Cot::Tuple(sum))
        }
    }
}

/// An instruction holding the cotangent of a value of shape `shape` (zeros where none).
pub(crate) fn materialize(em: &mut Emitter, c: Cot, shape: &Shape) -> R<InstrId> {
    match c {
        Cot::Zero => em.zeros(shape),
        Cot::Value(id) => Ok(id),
        Cot::Tuple(parts) => {
            let shapes = shape.as_tuple().unwrap_or(&[]).to_vec();
            let ids = parts
                .into_iter()
                .zip(&shapes)
                .map(|(p, s)| materialize(em, p, s))
                .collect::<R<Vec<_>>>()?;
            Ok(em.tuple(&ids))
        }
    }
}
