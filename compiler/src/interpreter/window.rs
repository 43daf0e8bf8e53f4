//! Windowed ops: `reduce-window` and `select-and-scatter`.
//!
//! A window position `w` of output position `o` in one dimension reads the (base-dilated,
//! padded) input at `o * stride + w * window_dilation - pad_low`; positions in padding or in
//! the holes of base dilation hold no input element. Per dimension these positions are
//! tabulated once, so the hot loop only adds precomputed offsets.

use super::element::{for_each_type, typed, Elem};
use super::elementwise::{binary_fn, Arith};
use super::plan::ScalarFn;
use super::reduce::{array_from_scalars, call_reducer, element_literal, simple_binary};
use super::shape_ops::strides_of;
use super::{err, EvalError, EvalResult, Evaluator};
use crate::ir::{Array, ArrayShape, ComputationId, Literal, Shape, Window};

/// Where each (output position, window position) of every dimension reads its input.
struct WindowTables {
    out_dims: Vec<i64>,
    window_dims: Vec<i64>,
    /// `tables[d][o * window + w]`: input offset contribution, or `None` for padding.
    tables: Vec<Vec<Option<isize>>>,
}

impl WindowTables {
    fn new(input: &ArrayShape, window: &Window) -> EvalResult<WindowTables> {
        let rank = input.rank();
        if window.dims.len() != rank {
            return err(format!(
                "a window of {} dimensions for an operand of rank {rank}",
                window.dims.len()
            ));
        }
        let strides = strides_of(&input.dims);
        let mut out_dims = Vec::with_capacity(rank);
        let mut tables = Vec::with_capacity(rank);
        for (d, w) in window.dims.iter().enumerate() {
            if w.size < 1 || w.stride < 1 || w.window_dilation < 1 || w.base_dilation < 1 {
                return err(format!(
                    "window dimension {d} has a non-positive size, stride or dilation"
                ));
            }
            let n = input.dims[d];
            let dilated = if n == 0 {
                0
            } else {
                (n - 1) * w.base_dilation + 1
            };
            let padded = dilated + w.pad_low + w.pad_high;
            let span = (w.size - 1) * w.window_dilation + 1;
            let out = if padded < span {
                0
            } else {
                (padded - span) / w.stride + 1
            };
            let mut table = Vec::with_capacity((out * w.size) as usize);
            for o in 0..out {
                for k in 0..w.size {
                    let p = o * w.stride + k * w.window_dilation - w.pad_low;
                    let valid = p >= 0 && p < dilated && p % w.base_dilation == 0;
                    table.push(valid.then(|| (p / w.base_dilation) as isize * strides[d]));
                }
            }
            out_dims.push(out);
            tables.push(table);
        }
        Ok(WindowTables {
            out_dims,
            window_dims: window.dims.iter().map(|w| w.size).collect(),
            tables,
        })
    }

    /// Fills `buf` with the input offsets of every window position of output `index`
    /// (row-major over the window), `None` for padding. `tmp` is scratch space.
    fn offsets(&self, index: &[i64], buf: &mut Vec<Option<isize>>, tmp: &mut Vec<Option<isize>>) {
        buf.clear();
        buf.push(Some(0));
        for (d, &o) in index.iter().enumerate() {
            let size = self.window_dims[d] as usize;
            let row = &self.tables[d][o as usize * size..(o as usize + 1) * size];
            tmp.clear();
            for &base in buf.iter() {
                for &r in row {
                    tmp.push(match (base, r) {
                        (Some(b), Some(r)) => Some(b + r),
                        _ => None,
                    });
                }
            }
            std::mem::swap(buf, tmp);
        }
    }
}

/// Advances a row-major index over `dims`; false when it wraps around.
fn next_index(index: &mut [i64], dims: &[i64]) -> bool {
    for d in (0..dims.len()).rev() {
        index[d] += 1;
        if index[d] < dims[d] {
            return true;
        }
        index[d] = 0;
    }
    false
}

pub(crate) fn reduce_window(
    ev: &Evaluator,
    operands: &[&Array],
    window: &Window,
    to_apply: ComputationId,
    shape: &Shape,
) -> EvalResult<Literal> {
    if operands.is_empty() || !operands.len().is_multiple_of(2) {
        return err("reduce-window needs N inputs and N init values");
    }
    let n = operands.len() / 2;
    let (inputs, inits) = operands.split_at(n);
    for (k, (x, init)) in inputs.iter().zip(inits).enumerate() {
        if x.shape.dims != inputs[0].shape.dims {
            return err(format!(
                "reduce-window input {k} is {}, input 0 is {}",
                x.shape, inputs[0].shape
            ));
        }
        if init.len() != 1 || init.element_type() != x.element_type() {
            return err(format!(
                "reduce-window init {k} should be a {} scalar",
                x.element_type()
            ));
        }
    }
    let t = WindowTables::new(&inputs[0].shape, window)?;
    let out_count: usize = t.out_dims.iter().map(|&d| d as usize).product();
    let mut index = vec![0i64; t.out_dims.len()];
    let (mut buf, mut tmp) = (Vec::new(), Vec::new());

    if let (1, Some((op, swapped))) = (n, simple_binary(ev, to_apply)) {
        let x = inputs[0];
        let data = for_each_type!(x.element_type(), T => {
            let xs = typed::<T>(x)?;
            let init = typed::<T>(inits[0])?[0];
            let f = binary_fn::<T>(op)?;
            let mut out: Vec<T> = Vec::with_capacity(out_count);
            for _ in 0..out_count {
                t.offsets(&index, &mut buf, &mut tmp);
                let mut acc = init;
                for o in &buf {
                    // Padding holds the init value, as HLO defines it.
                    let v = o.map_or(init, |o| xs[o as usize]);
                    acc = if swapped { f(v, acc) } else { f(acc, v) };
                }
                out.push(acc);
                next_index(&mut index, &t.out_dims);
            }
            T::wrap(out)
        });
        return Ok(Array::new(ArrayShape::new(x.element_type(), &t.out_dims), data).into());
    }

    let init_literals: Vec<Literal> = inits.iter().map(|i| Literal::Array((*i).clone())).collect();
    let mut results: Vec<Vec<Literal>> = vec![Vec::with_capacity(out_count); n];
    for _ in 0..out_count {
        t.offsets(&index, &mut buf, &mut tmp);
        let mut accs = init_literals.clone();
        for o in &buf {
            let elems: Vec<Literal> = match o {
                Some(o) => inputs
                    .iter()
                    .map(|x| element_literal(x, *o as usize))
                    .collect(),
                None => init_literals.clone(),
            };
            accs = call_reducer(ev, to_apply, &accs, &elems)?;
        }
        for (k, a) in accs.into_iter().enumerate() {
            results[k].push(a);
        }
        next_index(&mut index, &t.out_dims);
    }
    let outs: Vec<Literal> = results
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let ty = match shape {
                Shape::Tuple(s) => s.get(k).and_then(|s| s.element_type()),
                s => s.element_type(),
            }
            .unwrap_or(inits[k].element_type());
            array_from_scalars(ty, &t.out_dims, r).map(Literal::Array)
        })
        .collect::<EvalResult<_>>()?;
    Ok(if n == 1 {
        outs.into_iter().next().unwrap()
    } else {
        Literal::Tuple(outs)
    })
}

/// `select-and-scatter(operand, source, init)`: in every window of `operand` pick one element
/// with `select` (the current pick is replaced by `e` when `select(pick, e)` is false), and
/// combine the window's `source` value into the output at that element with `scatter`.
/// Padding is never picked.
pub(crate) fn select_and_scatter(
    ev: &Evaluator,
    operand: &Array,
    source: &Array,
    init: &Array,
    window: &Window,
    select: ComputationId,
    scatter: ComputationId,
) -> EvalResult<Array> {
    let t = WindowTables::new(&operand.shape, window)?;
    if source.shape.dims[..] != t.out_dims[..] {
        return err(format!(
            "select-and-scatter source is {} but the windows form {:?}",
            source.shape, t.out_dims
        ));
    }
    if init.len() != 1 || init.element_type() != source.element_type() {
        return err("select-and-scatter init must be a scalar of the source's type");
    }
    let count: usize = t.out_dims.iter().map(|&d| d as usize).product();
    let mut index = vec![0i64; t.out_dims.len()];
    let (mut buf, mut tmp) = (Vec::new(), Vec::new());
    let fast_select = match ev.plan(select).scalar_fn {
        Some(ScalarFn::Compare {
            direction,
            comparison_type,
            swapped,
        }) => Some((direction, comparison_type, swapped)),
        _ => None,
    };
    let fast_scatter = simple_binary(ev, scatter);
    if let (Some((dir, ct, sel_swapped)), Some((op, sc_swapped)), true) = (
        fast_select,
        fast_scatter,
        operand.element_type() == source.element_type(),
    ) {
        let total = ct == Some(crate::ir::ComparisonType::TotalOrder);
        let data = for_each_type!(operand.element_type(), T => {
            let xs = typed::<T>(operand)?;
            let src = typed::<T>(source)?;
            let f = binary_fn::<T>(op)?;
            let mut out = vec![typed::<T>(init)?[0]; xs.len()];
            for s in src.iter().take(count) {
                t.offsets(&index, &mut buf, &mut tmp);
                let mut pick: Option<usize> = None;
                for o in buf.iter().flatten() {
                    let o = *o as usize;
                    pick = Some(match pick {
                        None => o,
                        Some(p) => {
                            let keep = if sel_swapped {
                                T::compare(xs[o], xs[p], dir, total)
                            } else {
                                T::compare(xs[p], xs[o], dir, total)
                            };
                            if keep { p } else { o }
                        }
                    });
                }
                if let Some(p) = pick {
                    out[p] = if sc_swapped { f(*s, out[p]) } else { f(out[p], *s) };
                }
                next_index(&mut index, &t.out_dims);
            }
            T::wrap(out)
        });
        return Ok(Array::new(
            operand.shape.with_element_type(source.element_type()),
            data,
        ));
    }

    // General select and scatter computations, called on scalar literals.
    let mut out: Vec<Literal> = vec![Literal::Array(init.clone()); operand.len()];
    for s in 0..count {
        t.offsets(&index, &mut buf, &mut tmp);
        let mut pick: Option<usize> = None;
        for o in buf.iter().flatten() {
            let o = *o as usize;
            pick = Some(match pick {
                None => o,
                Some(p) => {
                    let a = element_literal(operand, p);
                    let b = element_literal(operand, o);
                    let keep = ev.eval_computation(select, &[&a, &b])?;
                    match keep.as_array().and_then(|k| bool::slice(&k.data)) {
                        Some([true]) => p,
                        Some([false]) => o,
                        _ => return Err(EvalError::new("select must return a pred scalar")),
                    }
                }
            });
        }
        if let Some(p) = pick {
            let v = element_literal(source, s);
            out[p] = ev.eval_computation(scatter, &[&out[p], &v])?;
        }
        next_index(&mut index, &t.out_dims);
    }
    array_from_scalars(source.element_type(), &operand.shape.dims, &out)
}
