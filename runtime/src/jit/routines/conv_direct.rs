//! Plans for the kernels crate's direct convolutions (`tessel_kernels::conv_direct`): the
//! forward convolution in `b01f_01io->b01f` labels and its weight gradient in the labels JAX
//! emits, `f01b_i01o->01bf`, both 2-D, stride 1, with few input channels. Anything else is
//! declined (`None`), and `conv_select` tries the next routine.

use super::conv_epilogue::{ConvEpilogue, PoolTargets};
use super::conv_shape::{f32_dims, nhwc_geometry, plain_window, ConvOperands};
use super::operand_plan::OperandPlan;
use crate::jit::buffer::Addr;
use crate::jit::host::{guarded, resolve, Status};
use tessel_compiler::ir::{ConvDimensionNumbers, Convolution};
use tessel_kernels::geometry::window_output;
use tessel_kernels::pooling::PoolEpilogue;
use tessel_kernels::{conv_direct, Conv2dGeometry};

/// A forward convolution on the direct loops, with its buffers.
#[derive(Clone, Debug)]
pub(crate) struct DirectConvPlan {
    name: String,
    routine: conv_direct::DirectConv,
    input: Addr,
    kernel: Addr,
    output: Addr,
    scratch: Addr,
    /// The bias and the max-pool it computes as it stores its output.
    pub(super) epilogue: ConvEpilogue,
}

impl DirectConvPlan {
    /// Plans convolution `name` if it is an NHWC / HWIO forward convolution the direct loops
    /// take, else `None` (nothing is allocated then).
    pub(crate) fn new(
        ops: &ConvOperands,
        threads: usize,
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> Option<DirectConvPlan> {
        let (name, conv) = (ops.name, ops.conv);
        let (input, kernel, output) = (ops.input, ops.kernel, ops.output);
        if conv.dims != ConvDimensionNumbers::nhwc_hwio() {
            return None;
        }
        let pads = plain_window(conv)?;
        let (i, k, o) = (f32_dims(input.1)?, f32_dims(kernel.1)?, f32_dims(output.1)?);
        let [kh, kw, kc, ko] = k[..] else { return None };
        let [on, oh, ow, oc] = o[..] else { return None };
        let geometry = nhwc_geometry(conv, &i, [kh, kw], ko, pads, [oh, ow])?;
        if kc != geometry.channels || on != geometry.batch || oc != ko {
            return None;
        }
        let routine = conv_direct::DirectConv::new(&geometry, threads).ok()?;
        Some(DirectConvPlan {
            name: name.to_string(),
            scratch: alloc(routine.scratch_bytes()),
            routine,
            input: input.0,
            kernel: kernel.0,
            output: output.0,
            epilogue: ConvEpilogue::default(),
        })
    }

    /// Takes `pool` (writing to `to`) into the epilogue, and `bias` into the stores when
    /// given, if the routine accepts the pool; else takes nothing.
    pub(super) fn take_pool(
        &mut self,
        pool: PoolEpilogue,
        to: PoolTargets,
        bias: Option<Addr>,
    ) -> bool {
        let accepts = self.routine.accepts_pool(&pool);
        self.epilogue.take_pool(accepts, pool, to, bias)
    }

    /// # Safety
    /// `arena` must be the program's arena.
    unsafe fn run(&self, arena: *mut u8) {
        let (bias, pool) = self.epilogue.resolve(arena);
        self.routine.run_fused(
            resolve(self.input, arena) as *const f32,
            resolve(self.kernel, arena) as *const f32,
            bias,
            pool,
            resolve(self.output, arena) as *mut f32,
            resolve(self.scratch, arena),
        )
    }
}

/// Called by generated code: `plan` is a `*const DirectConvPlan` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `DirectConvPlan` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn direct_conv_routine(
    plan: *const DirectConvPlan,
    arena: *mut u8,
) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || {
        unsafe { plan.run(arena) };
        Ok(())
    })
}

/// `f01b_i01o->01bf`, the weight-gradient labels.
pub(crate) fn weight_gradient_labels() -> ConvDimensionNumbers {
    ConvDimensionNumbers {
        input_batch: 3,
        input_feature: 0,
        input_spatial: vec![1, 2],
        kernel_input_feature: 0,
        kernel_output_feature: 3,
        kernel_spatial: vec![1, 2],
        output_batch: 2,
        output_feature: 3,
        output_spatial: vec![0, 1],
    }
}

/// The geometry of the forward convolution whose weight gradient `conv` is, in the
/// `f01b_i01o->01bf` labels: input `[F, H, W, B]`, output gradient `[F, GH, GW, O]`, weight
/// gradient `[OH, OW, B, O]` (the kernel of the forward convolution, whose output is GH x GW).
pub(crate) fn weight_gradient_geometry(
    conv: &Convolution,
    input: &[usize],
    grad: &[usize],
    output: &[usize],
) -> Option<Conv2dGeometry> {
    let pads = plain_window(conv)?;
    let [f, h, w, b] = input[..] else { return None };
    let [gf, gh, gw, go] = grad[..] else {
        return None;
    };
    let [oh, ow, ob, oc] = output[..] else {
        return None;
    };
    let sizes_match = gf == f
        && ob == b
        && oc == go
        && conv.window.dims[0].size as usize == gh
        && conv.window.dims[1].size as usize == gw
        && window_output(h, pads[0], gh) == Some(oh)
        && window_output(w, pads[1], gw) == Some(ow);
    sizes_match.then_some(Conv2dGeometry {
        batch: f,
        height: h,
        width: w,
        channels: b,
        window: [oh, ow],
        out_channels: oc,
        padding: pads,
    })
}

/// Plans convolution `ops` if it is a weight gradient in `f01b_i01o->01bf` labels the direct
/// loops take (the kernel operand is the output gradient), else `None` (nothing is allocated
/// then).
pub(crate) fn plan_direct_weight_grad(
    ops: &ConvOperands,
    threads: usize,
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Option<OperandPlan<conv_direct::DirectWeightGradient>> {
    if ops.conv.dims != weight_gradient_labels() {
        return None;
    }
    let (i, g, o) = (
        f32_dims(ops.input.1)?,
        f32_dims(ops.kernel.1)?,
        f32_dims(ops.output.1)?,
    );
    let geometry = weight_gradient_geometry(ops.conv, &i, &g, &o)?;
    let routine = conv_direct::DirectWeightGradient::new(&geometry, threads).ok()?;
    Some(OperandPlan::new(ops.name, routine, ops.addrs(), alloc))
}
