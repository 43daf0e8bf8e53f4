//! Helpers shared by the op families: operand checks, shape text for messages, dynamic
//! dimension arithmetic, and the signatures of called computations.

use super::ShapeError;
use crate::ir::{ArrayShape, ComputationId, ElementType, Module, Shape, UNKNOWN_DIM};
use smallvec::SmallVec;

pub(crate) type Result<T> = std::result::Result<T, ShapeError>;

/// A shape as HLO text without its layout: `f32[2,3]`, `(s32[], f32[<=4])`.
pub(crate) fn text(s: &Shape) -> String {
    s.to_text(false)
}

pub(crate) fn array_text(a: &ArrayShape) -> String {
    Shape::Array(a.clone()).to_text(false)
}

/// `f32[2]`, `f32[2] and f32[3]`, `f32[2], f32[3] and s32[]`.
pub(crate) fn list(shapes: &[&Shape]) -> String {
    match shapes.len() {
        0 => "no operands".to_string(),
        1 => text(shapes[0]),
        n => {
            let head: Vec<String> = shapes[..n - 1].iter().map(|s| text(s)).collect();
            format!("{} and {}", head.join(", "), text(shapes[n - 1]))
        }
    }
}

/// `(f32[], s32[])`: a parenthesised, comma-separated list, as signatures print.
pub(crate) fn paren_list(shapes: &[&Shape]) -> String {
    let parts: Vec<String> = shapes.iter().map(|s| text(s)).collect();
    format!("({})", parts.join(", "))
}

pub(crate) fn err<T>(message: impl Into<String>) -> Result<T> {
    Err(ShapeError::new(message))
}

/// Checks the operand count, naming the operands that were given.
pub(crate) fn expect_operands(name: &str, operands: &[&Shape], n: usize) -> Result<()> {
    if operands.len() != n {
        return err(format!(
            "{name}: expects {n} operand{}, got {} ({})",
            if n == 1 { "" } else { "s" },
            operands.len(),
            list(operands)
        ));
    }
    Ok(())
}

/// The array inside `shape`, or an error naming the op and the operand's role.
pub(crate) fn expect_array<'a>(name: &str, role: &str, shape: &'a Shape) -> Result<&'a ArrayShape> {
    shape.as_array().ok_or_else(|| {
        ShapeError::new(format!(
            "{name}: {role} must be an array, got {}",
            text(shape)
        ))
    })
}

/// A scalar array, or an error saying what was expected.
pub(crate) fn expect_scalar<'a>(
    name: &str,
    role: &str,
    shape: &'a Shape,
) -> Result<&'a ArrayShape> {
    let a = expect_array(name, role, shape)?;
    if a.rank() != 0 {
        return err(format!(
            "{name}: {role} must be a scalar, got {}",
            text(shape)
        ));
    }
    Ok(a)
}

/// Builds an array shape from `(size, dynamic)` pairs, keeping the `dynamic` vector empty when
/// every dimension is static (the canonical form, so that derived equality works).
pub(crate) fn make_array(element_type: ElementType, dims: &[(i64, bool)]) -> ArrayShape {
    let mut a = ArrayShape::new(element_type, &dims.iter().map(|d| d.0).collect::<Vec<_>>());
    if dims.iter().any(|d| d.1) {
        a.dynamic = dims.iter().map(|d| d.1).collect::<SmallVec<[bool; 4]>>();
    }
    a
}

/// `(size, dynamic)` of dimension `d`.
pub(crate) fn dim(a: &ArrayShape, d: usize) -> (i64, bool) {
    (a.dims[d], a.is_dynamic_dim(d) || a.dims[d] == UNKNOWN_DIM)
}

/// The canonical form of an array shape (see [`make_array`]).
pub(crate) fn canonical(a: &ArrayShape) -> ArrayShape {
    let dims: Vec<(i64, bool)> = (0..a.rank()).map(|d| dim(a, d)).collect();
    make_array(a.element_type, &dims)
}

/// Two operand dimensions that an elementwise op may combine: equal sizes, or one of them
/// dynamic with an unknown size (checked at run time, and explained by the legality checker).
pub(crate) fn sizes_compatible(a: i64, b: i64) -> bool {
    a == b || a == UNKNOWN_DIM || b == UNKNOWN_DIM
}

/// The dimension two compatible dimensions combine to: the known size, dynamic if either is.
pub(crate) fn merge_dim(a: (i64, bool), b: (i64, bool)) -> (i64, bool) {
    let size = if a.0 == UNKNOWN_DIM { b.0 } else { a.0 };
    (size, a.1 || b.1)
}

/// Dimensions of two arrays combined elementwise, or None when they differ.
pub(crate) fn merge_dims(a: &ArrayShape, b: &ArrayShape) -> Option<Vec<(i64, bool)>> {
    if a.rank() != b.rank() {
        return None;
    }
    (0..a.rank())
        .map(|d| {
            let (x, y) = (dim(a, d), dim(b, d));
            sizes_compatible(x.0, y.0).then(|| merge_dim(x, y))
        })
        .collect()
}

/// Whether a given (recorded) shape agrees with an inferred one: equal element types and
/// dimensions, with matching dynamic flags, except that an unknown size matches any size.
pub(crate) fn shapes_agree(inferred: &Shape, given: &Shape) -> bool {
    match (inferred, given) {
        (Shape::Token, Shape::Token) => true,
        (Shape::Tuple(a), Shape::Tuple(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| shapes_agree(x, y))
        }
        (Shape::Array(a), Shape::Array(b)) => a.element_type == b.element_type && dims_agree(a, b),
        _ => false,
    }
}

/// [`shapes_agree`] for array dimensions only (element types may differ).
pub(crate) fn dims_agree(a: &ArrayShape, b: &ArrayShape) -> bool {
    a.rank() == b.rank()
        && (0..a.rank()).all(|d| {
            let (x, y) = (dim(a, d), dim(b, d));
            x.0 == UNKNOWN_DIM || y.0 == UNKNOWN_DIM || x == y
        })
}

/// Checks a list of dimension numbers: each in `0..rank`, none repeated.
pub(crate) fn check_dimension_list(
    name: &str,
    what: &str,
    dims: &[i64],
    rank: usize,
    shape: &Shape,
) -> Result<()> {
    let mut seen = vec![false; rank];
    for &d in dims {
        if d < 0 || d as usize >= rank {
            return err(format!(
                "{name}: {what} {d} is out of range for {} (rank {rank}); dimensions are 0..{}",
                text(shape),
                rank as i64 - 1
            ));
        }
        if seen[d as usize] {
            return err(format!(
                "{name}: {what} {d} appears twice in {dims:?} for {}",
                text(shape)
            ));
        }
        seen[d as usize] = true;
    }
    Ok(())
}

/// The parameter shapes and result shape of a called computation.
pub(crate) struct Signature<'m> {
    pub name: &'m str,
    pub params: Vec<&'m Shape>,
    pub result: &'m Shape,
}

impl Signature<'_> {
    /// `(f32[], f32[]) -> f32[]`.
    pub(super) fn text(&self) -> String {
        format!("{} -> {}", paren_list(&self.params), text(self.result))
    }
}

/// The signature of computation `id`, called by op `name` through attribute `role`.
pub(crate) fn signature<'m>(
    module: &'m Module,
    name: &str,
    role: &str,
    id: ComputationId,
) -> Result<Signature<'m>> {
    let Some(comp) = module.computations.get(id.0 as usize) else {
        return err(format!(
            "{name}: {role} refers to {id}, but the module has only {} computations",
            module.computations.len()
        ));
    };
    if !comp.has_root() || !comp.contains(comp.root()) {
        return err(format!(
            "{name}: {role} computation {} has no root instruction",
            comp.name
        ));
    }
    let params = comp
        .parameters()
        .into_iter()
        .map(|p| &comp.get(p).shape)
        .collect();
    Ok(Signature {
        name: &comp.name,
        params,
        result: &comp.get(comp.root()).shape,
    })
}

/// Checks that `to_apply` is a reducer: `2N` scalar parameters (N accumulators of types
/// `acc_types`, then N inputs of types `input_types`) returning N scalar accumulators
/// (a tuple when N > 1). `context` describes the operands for the message.
pub(crate) fn check_reducer(
    module: &Module,
    name: &str,
    role: &str,
    to_apply: ComputationId,
    acc_types: &[ElementType],
    input_types: &[ElementType],
    context: &str,
) -> Result<()> {
    let sig = signature(module, name, role, to_apply)?;
    let n = acc_types.len();
    let expected_params: Vec<Shape> = acc_types
        .iter()
        .chain(input_types)
        .map(|&t| Shape::scalar(t))
        .collect();
    let expected_result = if n == 1 {
        Shape::scalar(acc_types[0])
    } else {
        Shape::Tuple(acc_types.iter().map(|&t| Shape::scalar(t)).collect())
    };
    let params_ok = sig.params.len() == expected_params.len()
        && sig
            .params
            .iter()
            .zip(&expected_params)
            .all(|(p, e)| shapes_agree(e, p));
    let result_ok = shapes_agree(&expected_result, sig.result)
        || (n == 1 && *sig.result == Shape::Tuple(vec![expected_result.clone()]));
    if params_ok && result_ok {
        return Ok(());
    }
    let expected = format!(
        "{} -> {}",
        paren_list(&expected_params.iter().collect::<Vec<_>>()),
        text(&expected_result)
    );
    err(format!(
        "{name}: {role} computation {} has signature {}, but {context} need {expected}",
        sig.name,
        sig.text()
    ))
}
