//! Recognizing the max-pool fusions the kernels crate's pooling routines compute
//! (`tessel_kernels::pooling`), on f32 NHWC arrays with the window over height and width only:
//!
//! - forward: `reduce-window(max(p, 0) | p, -inf)` with reducer `max(acc, x)`, no padding or
//!   dilation; also over `p + broadcast(bias)` (the inference form, which only a
//!   convolution's epilogue computes, `pool_fold.rs`);
//! - backward: `select(compare(p, 0, GT), select-and-scatter(max(p, 0) | p, g, 0), 0)` (or the
//!   select-and-scatter alone) with select `a >= b` and scatter `a + b`, windows tiling the
//!   operand, where `g` is a parameter or a reshape of one; alone, or in a tuple with its sum
//!   over the first three dimensions (`reduce(d, 0)` with `add`).
//!
//! Anything else (another order of `max`'s operands, a `-0` constant, ...) is not matched, so
//! what the routines compute is exactly what the HLO says.

use super::bias_match::bias_add_at;
use tessel_compiler::ir::{
    BinaryOp, ComparisonDirection, Computation, ElementType, InstrId, Module, Op, Window,
};
use tessel_kernels::pooling::PoolGeometry;

/// A fusion the pooling routines compute. Parameters are the fusion's parameter numbers.
#[derive(Clone, Debug)]
pub enum PoolMatch {
    Forward {
        input: u32,
        geometry: PoolGeometry,
        relu: bool,
        /// A bias added before the ReLU, `max(p + broadcast(bias), 0)` (the inference form,
        /// where the activation is not kept): only a convolution's epilogue computes it
        /// (`pool_fold.rs`); the pooling routine declines it.
        bias: Option<u32>,
    },
    Backward {
        z: u32,
        grad: u32,
        geometry: PoolGeometry,
        relu: bool,
        gate: bool,
        /// Which output of the fusion's tuple is the gradient and which the bias sum (with the
        /// reduce instruction); `None` when the fusion returns the gradient alone.
        outputs: Option<(usize, usize, InstrId)>,
    },
}

/// The match for fusion computation `comp`, if it is one of the forms above.
pub fn match_pool_fusion(module: &Module, comp: &Computation) -> Option<PoolMatch> {
    let root = comp.get(comp.root());
    match &root.op {
        Op::ReduceWindow { window, to_apply } => {
            let [x, init] = root.operands()[..] else {
                return None;
            };
            let (input, bias, relu) = activation_of(comp, x)?;
            let geometry = geometry(comp, x, window)?;
            let reducer = module.computation(*to_apply);
            (scalar(comp, init)? == f32::NEG_INFINITY.to_bits()
                && binary_of_params(reducer, BinaryOp::Maximum, false))
            .then_some(PoolMatch::Forward {
                input,
                geometry,
                relu,
                bias,
            })
        }
        Op::Tuple => {
            let ops = root.operands();
            if ops.len() != 2 {
                return None;
            }
            let r = ops
                .iter()
                .position(|&o| matches!(comp.get(o).op, Op::Reduce { .. }))?;
            let (d, red) = (ops[1 - r], ops[r]);
            let PoolMatch::Backward {
                z,
                grad,
                geometry,
                relu,
                gate,
                ..
            } = backward(module, comp, d)?
            else {
                return None;
            };
            let instr = comp.get(red);
            let Op::Reduce {
                dimensions,
                to_apply,
            } = &instr.op
            else {
                return None;
            };
            let ok = instr.operands() == [d, instr.operands()[1]]
                && dimensions[..] == [0, 1, 2]
                && scalar(comp, instr.operands()[1])? == 0
                && binary_of_params(module.computation(*to_apply), BinaryOp::Add, true);
            ok.then_some(PoolMatch::Backward {
                z,
                grad,
                geometry,
                relu,
                gate,
                outputs: Some((1 - r, r, red)),
            })
        }
        _ => backward(module, comp, comp.root()),
    }
}

/// The gradient `d` alone (see the module doc).
fn backward(module: &Module, comp: &Computation, d: InstrId) -> Option<PoolMatch> {
    let instr = comp.get(d);
    let (ss, gate_param) = match instr.op {
        Op::Select => {
            let [pred, ss, zero] = instr.operands()[..] else {
                return None;
            };
            let p = comp.get(pred);
            let Op::Compare {
                direction: ComparisonDirection::Gt,
                ..
            } = p.op
            else {
                return None;
            };
            let [pz, pzero] = p.operands()[..] else {
                return None;
            };
            if zero_splat(comp, zero)? != 0 || zero_splat(comp, pzero)? != 0 {
                return None;
            }
            (ss, Some(param(comp, pz)?))
        }
        Op::SelectAndScatter { .. } => (d, None),
        _ => return None,
    };
    let s = comp.get(ss);
    let Op::SelectAndScatter {
        window,
        select,
        scatter,
    } = &s.op
    else {
        return None;
    };
    let [operand, source, init] = s.operands()[..] else {
        return None;
    };
    let (z, relu) = relu_of(comp, operand)?;
    if gate_param.is_some_and(|g| g != z) || scalar(comp, init)? != 0 {
        return None;
    }
    let grad = match comp.get(source).op {
        Op::Reshape => param(comp, comp.get(source).operands()[0])?,
        _ => param(comp, source)?,
    };
    let geometry = geometry(comp, operand, window)?;
    let [oh, ow] = geometry.output_hw();
    let src_dims = &comp.get(source).shape.as_array()?.dims;
    let want = [geometry.batch, oh, ow, geometry.channels].map(|v| v as i64);
    let tiles = geometry.window == geometry.stride
        && geometry.height % geometry.window[0] == 0
        && geometry.width % geometry.window[1] == 0;
    let regions = compare_of_params(module.computation(*select), ComparisonDirection::Ge)
        && binary_of_params(module.computation(*scatter), BinaryOp::Add, true);
    (tiles && regions && src_dims[..] == want).then_some(PoolMatch::Backward {
        z,
        grad,
        geometry,
        relu,
        gate: gate_param.is_some(),
        outputs: None,
    })
}

/// What a forward pool reads: `relu_of`'s forms, or either of them over `p + broadcast(q)`
/// (a bias over the last, NHWC feature dimension): the parameter `p`, the bias `q` if any,
/// and whether the ReLU is there.
fn activation_of(comp: &Computation, x: InstrId) -> Option<(u32, Option<u32>, bool)> {
    if let Some((p, relu)) = relu_of(comp, x) {
        return Some((p, None, relu));
    }
    let i = comp.get(x);
    let (a, relu) = match i.op {
        Op::Binary(BinaryOp::Maximum) => {
            let [a, zero] = i.operands()[..] else {
                return None;
            };
            (zero_splat(comp, zero)? == 0).then_some((a, true))?
        }
        _ => (x, false),
    };
    let b = bias_add_at(comp, a, 3)?;
    Some((b.value, Some(b.bias), relu))
}

/// `max(p, 0)` (relu) or `p`: the parameter number and whether the ReLU is there.
fn relu_of(comp: &Computation, x: InstrId) -> Option<(u32, bool)> {
    let i = comp.get(x);
    match i.op {
        Op::Parameter(n) => Some((n, false)),
        Op::Binary(BinaryOp::Maximum) => {
            let [p, zero] = i.operands()[..] else {
                return None;
            };
            (zero_splat(comp, zero)? == 0).then_some((param(comp, p)?, true))
        }
        _ => None,
    }
}

fn param(comp: &Computation, id: InstrId) -> Option<u32> {
    match comp.get(id).op {
        Op::Parameter(n) => Some(n),
        _ => None,
    }
}

/// The bits of an f32 scalar constant.
fn scalar(comp: &Computation, id: InstrId) -> Option<u32> {
    let Op::Constant(lit) = &comp.get(id).op else {
        return None;
    };
    let a = lit
        .as_array()
        .filter(|a| a.len() == 1 && a.element_type() == ElementType::F32)?;
    Some((a.data.get_f64(0) as f32).to_bits())
}

/// The bits of a scalar constant, or of a broadcast of one.
fn zero_splat(comp: &Computation, id: InstrId) -> Option<u32> {
    match &comp.get(id).op {
        Op::Broadcast { dimensions } if dimensions.is_empty() => {
            scalar(comp, comp.get(id).operands()[0])
        }
        _ => scalar(comp, id),
    }
}

/// The operand's NHWC geometry under a window over height and width only, no padding.
fn geometry(comp: &Computation, x: InstrId, window: &Window) -> Option<PoolGeometry> {
    let s = comp.get(x).shape.as_array()?;
    if s.element_type != ElementType::F32 || s.rank() != 4 || window.dims.len() != 4 {
        return None;
    }
    let plain = window.dims.iter().all(|d| {
        d.pad_low == 0
            && d.pad_high == 0
            && d.window_dilation == 1
            && d.base_dilation == 1
            && !d.reversal
            && d.size > 0
            && d.stride > 0
    });
    let unit = |k: usize| window.dims[k].size == 1 && window.dims[k].stride == 1;
    if !plain || !unit(0) || !unit(3) || s.dims.iter().any(|&d| d < 0) {
        return None;
    }
    let d = |k: usize| s.dims[k] as usize;
    let w = |k: usize| window.dims[k].size as usize;
    let st = |k: usize| window.dims[k].stride as usize;
    Some(PoolGeometry {
        batch: d(0),
        height: d(1),
        width: d(2),
        channels: d(3),
        window: [w(1), w(2)],
        stride: [st(1), st(2)],
    })
}

/// A region `p0 op p1` (or `p1 op p0` when the op commutes bitwise).
fn binary_of_params(region: &Computation, op: BinaryOp, commutes: bool) -> bool {
    let root = region.get(region.root());
    let ordered = match root.operands()[..] {
        [a, b] => match (param(region, a), param(region, b)) {
            (Some(0), Some(1)) => true,
            (Some(1), Some(0)) => false,
            _ => return false,
        },
        _ => return false,
    };
    root.op == Op::Binary(op) && (ordered || commutes) && region.parameters().len() == 2
}

/// A region `compare(p0, p1, direction)`.
fn compare_of_params(region: &Computation, direction: ComparisonDirection) -> bool {
    let root = region.get(region.root());
    let Op::Compare { direction: d, .. } = root.op else {
        return false;
    };
    let params = root
        .operands()
        .iter()
        .map(|&o| param(region, o))
        .collect::<Vec<_>>();
    d == direction && params == [Some(0), Some(1)] && region.parameters().len() == 2
}
