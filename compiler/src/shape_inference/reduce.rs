//! Reductions: reduce, reduce-window and select-and-scatter, with their called computations'
//! signatures.

use super::util::{
    array_text, check_dimension_list, check_reducer, dim, err, expect_array, expect_operands,
    expect_scalar, list, make_array, merge_dims, signature, text, Result,
};
use super::window::{check_window, window_output_dim, window_text};
use crate::ir::{ArrayShape, ComputationId, ElementType, Module, Shape, Window};

/// Splits `N arrays then N init values`, checking that the arrays share dimensions and the
/// inits are scalars. Returns (arrays, init types).
fn split_variadic<'a>(
    name: &str,
    operands: &[&'a Shape],
) -> Result<(Vec<&'a ArrayShape>, Vec<ElementType>)> {
    if operands.is_empty() || !operands.len().is_multiple_of(2) {
        return err(format!(
            "{name}: expects N arrays followed by N init values, got {} operands ({})",
            operands.len(),
            list(operands)
        ));
    }
    let n = operands.len() / 2;
    let mut arrays: Vec<&ArrayShape> = Vec::with_capacity(n);
    for (i, s) in operands[..n].iter().enumerate() {
        let a = expect_array(name, &format!("operand {i}"), s)?;
        if let Some(first) = arrays.first() {
            if merge_dims(first, a).is_none() {
                return err(format!(
                    "{name}: the {n} reduced arrays must have equal dimensions, got {}",
                    list(&operands[..n])
                ));
            }
        }
        arrays.push(a);
    }
    let mut inits = Vec::with_capacity(n);
    for (i, s) in operands[n..].iter().enumerate() {
        let v = expect_scalar(name, &format!("init value {i} (operand {})", n + i), s)?;
        inits.push(v.element_type);
    }
    Ok((arrays, inits))
}

fn describe_operands(operands: &[&Shape]) -> String {
    let n = operands.len() / 2;
    format!(
        "operands {} with init {}",
        list(&operands[..n]),
        list(&operands[n..])
    )
}

/// One result per array, a tuple when there are several.
fn results(shapes: Vec<ArrayShape>) -> Shape {
    if shapes.len() == 1 {
        Shape::Array(shapes.into_iter().next().unwrap())
    } else {
        Shape::Tuple(shapes.into_iter().map(Shape::Array).collect())
    }
}

pub(crate) fn reduce(
    module: &Module,
    dimensions: &[i64],
    to_apply: ComputationId,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "reduce";
    let (arrays, inits) = split_variadic(name, operands)?;
    let first = arrays[0];
    check_dimension_list(name, "dimension", dimensions, first.rank(), operands[0])?;
    let inputs: Vec<ElementType> = arrays.iter().map(|a| a.element_type).collect();
    check_reducer(
        module,
        name,
        "to_apply",
        to_apply,
        &inits,
        &inputs,
        &describe_operands(operands),
    )?;
    let kept: Vec<(i64, bool)> = (0..first.rank())
        .filter(|d| !dimensions.contains(&(*d as i64)))
        .map(|d| dim(first, d))
        .collect();
    Ok(results(
        inits.iter().map(|&t| make_array(t, &kept)).collect(),
    ))
}

/// The shape of the window positions over `a`.
fn windowed(
    name: &str,
    a: &ArrayShape,
    window: &Window,
    operand: &Shape,
) -> Result<Vec<(i64, bool)>> {
    check_window(name, window)?;
    if window.dims.len() != a.rank() {
        return err(format!(
            "{name}: {} has {} dimensions but operand {} has rank {}",
            window_text(window),
            window.dims.len(),
            text(operand),
            a.rank()
        ));
    }
    window
        .dims
        .iter()
        .enumerate()
        .map(|(i, w)| window_output_dim(name, dim(a, i), w, i))
        .collect()
}

pub(crate) fn reduce_window(
    module: &Module,
    window: &Window,
    to_apply: ComputationId,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "reduce-window";
    let (arrays, inits) = split_variadic(name, operands)?;
    let out = windowed(name, arrays[0], window, operands[0])?;
    let inputs: Vec<ElementType> = arrays.iter().map(|a| a.element_type).collect();
    check_reducer(
        module,
        name,
        "to_apply",
        to_apply,
        &inits,
        &inputs,
        &describe_operands(operands),
    )?;
    Ok(results(
        inits.iter().map(|&t| make_array(t, &out)).collect(),
    ))
}

/// `select-and-scatter(operand, source, init)`: `select` picks one element per window
/// (`(T, T) -> pred[]`), `scatter` adds source values into it (a reducer).
pub(crate) fn select_and_scatter(
    module: &Module,
    window: &Window,
    select: ComputationId,
    scatter: ComputationId,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "select-and-scatter";
    expect_operands(name, operands, 3)?;
    let a = expect_array(name, "the operand", operands[0])?;
    let source = expect_array(name, "the source (operand 1)", operands[1])?;
    let init = expect_scalar(name, "the init value (operand 2)", operands[2])?;
    let positions = make_array(
        source.element_type,
        &windowed(name, a, window, operands[0])?,
    );
    if merge_dims(&positions, source).is_none() {
        return err(format!(
            "select-and-scatter: source {} must have one element per window position of \
             operand {} under {}, i.e. {}",
            text(operands[1]),
            text(operands[0]),
            window_text(window),
            array_text(&positions)
        ));
    }
    if init.element_type != a.element_type {
        return err(format!(
            "select-and-scatter: init value {} must have the element type of operand {}",
            text(operands[2]),
            text(operands[0])
        ));
    }
    let sig = signature(module, name, "select", select)?;
    let t = Shape::scalar(a.element_type);
    let pred = Shape::scalar(ElementType::Pred);
    if sig.params.len() != 2 || sig.params.iter().any(|p| **p != t) || *sig.result != pred {
        return err(format!(
            "select-and-scatter: select computation {} has signature {}, but operand {} needs \
             ({t_text}, {t_text}) -> pred[]",
            sig.name,
            sig.text(),
            text(operands[0]),
            t_text = text(&t)
        ));
    }
    check_reducer(
        module,
        name,
        "scatter",
        scatter,
        &[init.element_type],
        &[source.element_type],
        &format!(
            "source {} with init {}",
            text(operands[1]),
            text(operands[2])
        ),
    )?;
    Ok(Shape::Array(super::util::canonical(a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::ir::{BinaryOp, ComparisonDirection, Computation, Op, WindowDim};
    use ElementType::*;

    fn s(t: ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    /// Adds a computation `(t, t) -> t` applying `op` (or compare-GE when `op` is None).
    fn binary_region(
        m: &mut Module,
        name: &str,
        t: ElementType,
        op: Option<BinaryOp>,
    ) -> ComputationId {
        let id = m.add_computation(Computation::new(name));
        let mut b = Builder::new(m, id);
        let x = b.add_with_shape(Op::Parameter(0), Shape::scalar(t), &[]);
        let y = b.add_with_shape(Op::Parameter(1), Shape::scalar(t), &[]);
        match op {
            Some(op) => b.add(Op::Binary(op), &[x, y]).unwrap(),
            None => b
                .add(
                    Op::Compare {
                        direction: ComparisonDirection::Ge,
                        comparison_type: None,
                    },
                    &[x, y],
                )
                .unwrap(),
        };
        id
    }

    /// `(t0, t1, t0, t1) -> (t0, t1)`: a two-input reducer.
    fn pair_region(m: &mut Module, t0: ElementType, t1: ElementType) -> ComputationId {
        let id = m.add_computation(Computation::new("pair"));
        let mut b = Builder::new(m, id);
        let a0 = b.add_with_shape(Op::Parameter(0), Shape::scalar(t0), &[]);
        let a1 = b.add_with_shape(Op::Parameter(1), Shape::scalar(t1), &[]);
        let x0 = b.add_with_shape(Op::Parameter(2), Shape::scalar(t0), &[]);
        let x1 = b.add_with_shape(Op::Parameter(3), Shape::scalar(t1), &[]);
        let r0 = b.add(Op::Binary(BinaryOp::Maximum), &[a0, x0]).unwrap();
        let r1 = b.add(Op::Binary(BinaryOp::Add), &[a1, x1]).unwrap();
        b.add(Op::Tuple, &[r0, r1]).unwrap();
        id
    }

    #[test]
    fn reduce_removes_dimensions() {
        let mut m = Module::new("t");
        let add = binary_region(&mut m, "add", F32, Some(BinaryOp::Add));
        let x = s(F32, &[2, 3, 4]);
        let init = s(F32, &[]);
        let r = reduce(&m, &[0, 2], add, &[&x, &init]).unwrap();
        assert_eq!(r, s(F32, &[3]));
        let e = reduce(&m, &[3], add, &[&x, &init]).unwrap_err();
        assert!(
            e.message
                .contains("dimension 3 is out of range for f32[2,3,4]"),
            "{e}"
        );
    }

    #[test]
    fn reduce_checks_to_apply_signature() {
        let mut m = Module::new("t");
        let add_s32 = binary_region(&mut m, "add_s32", S32, Some(BinaryOp::Add));
        let x = s(F32, &[2, 3]);
        let init = s(F32, &[]);
        let e = reduce(&m, &[0], add_s32, &[&x, &init]).unwrap_err();
        assert!(
            e.message.contains(
                "to_apply computation add_s32 has signature (s32[], s32[]) -> s32[], but operands \
                 f32[2,3] with init f32[] need (f32[], f32[]) -> f32[]"
            ),
            "{e}"
        );
        let e = reduce(&m, &[0], ComputationId(99), &[&x, &init]).unwrap_err();
        assert!(e.message.contains("computation#99"), "{e}");
    }

    #[test]
    fn variadic_reduce_gives_tuple() {
        let mut m = Module::new("t");
        let pair = pair_region(&mut m, F32, S32);
        let x = s(F32, &[2, 3]);
        let i = s(S32, &[2, 3]);
        let r = reduce(&m, &[1], pair, &[&x, &i, &s(F32, &[]), &s(S32, &[])]).unwrap();
        assert_eq!(r, Shape::Tuple(vec![s(F32, &[2]), s(S32, &[2])]));
        let e = reduce(
            &m,
            &[1],
            pair,
            &[&x, &s(S32, &[3, 2]), &s(F32, &[]), &s(S32, &[])],
        )
        .unwrap_err();
        assert!(e.message.contains("f32[2,3] and s32[3,2]"), "{e}");
        let e = reduce(&m, &[1], pair, &[&x, &i, &s(F32, &[])]).unwrap_err();
        assert!(
            e.message.contains("N arrays followed by N init values"),
            "{e}"
        );
    }

    fn pool_window() -> Window {
        let d = |size, stride| WindowDim {
            stride,
            ..WindowDim::new(size)
        };
        Window {
            dims: vec![d(1, 1), d(2, 2), d(2, 2), d(1, 1)],
        }
    }

    #[test]
    fn reduce_window_pools() {
        let mut m = Module::new("t");
        let max = binary_region(&mut m, "max", F32, Some(BinaryOp::Maximum));
        let x = s(F32, &[8, 28, 28, 32]);
        let r = reduce_window(&m, &pool_window(), max, &[&x, &s(F32, &[])]).unwrap();
        assert_eq!(r, s(F32, &[8, 14, 14, 32]));
        let e = reduce_window(&m, &pool_window(), max, &[&s(F32, &[28, 28]), &s(F32, &[])])
            .unwrap_err();
        assert!(
            e.message
                .contains("has 4 dimensions but operand f32[28,28] has rank 2"),
            "{e}"
        );
    }

    #[test]
    fn select_and_scatter_checks_source_and_regions() {
        let mut m = Module::new("t");
        let ge = binary_region(&mut m, "ge", F32, None);
        let add = binary_region(&mut m, "add", F32, Some(BinaryOp::Add));
        let x = s(F32, &[8, 28, 28, 32]);
        let src = s(F32, &[8, 14, 14, 32]);
        let init = s(F32, &[]);
        let w = pool_window();
        assert_eq!(
            select_and_scatter(&m, &w, ge, add, &[&x, &src, &init]).unwrap(),
            x
        );
        let e = select_and_scatter(&m, &w, ge, add, &[&x, &s(F32, &[8, 14, 14, 31]), &init])
            .unwrap_err();
        assert!(
            e.message.contains("f32[8,14,14,31]") && e.message.contains("f32[8,28,28,32]"),
            "{e}"
        );
        // select returning f32 instead of pred.
        let e = select_and_scatter(&m, &w, add, add, &[&x, &src, &init]).unwrap_err();
        assert!(e.message.contains("-> pred[]"), "{e}");
    }
}
