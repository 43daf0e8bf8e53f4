//! Plans for the kernels crate's Winograd convolutions (`tessel_kernels::winograd`): the
//! forward convolution with NHWC input and output and the kernel in any layout (also
//! reversed), and the weight gradient in the labels JAX emits, `f01b_i01o->01bf`, with the
//! output in any layout. 2-D, stride 1, undilated, one group, 3x3 or 5x5 windows; anything
//! else is declined (`None`), and `conv_select` tries the next routine.

use super::conv_epilogue::{ConvEpilogue, PoolTargets};
use super::conv_shape::{f32_dims, plain_window, row_major_strides, ConvOperands};
use crate::jit::buffer::Addr;
use crate::jit::host::{guarded, resolve, Status};
use tessel_compiler::ir::WindowDim;
use tessel_kernels::geometry::window_output;
use tessel_kernels::pooling::PoolEpilogue;
use tessel_kernels::winograd::{
    KernelLayout, TransformOrder, WinogradConv, WinogradFilterGradient,
};
use tessel_kernels::Conv2dGeometry;

/// What a Winograd convolution computes, for the choice of its output tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    Forward,
    /// The forward routine with a reversed kernel: JAX's data gradient.
    DataGradient,
    FilterGradient,
}

impl Use {
    /// The output tile `m` of F(m x m, r x r) for an `r x r` window: F(4x4) for 3x3 and 5x5
    /// in all three uses (4 products per output instead of 9 for 5x5, 2.25 instead of 4 for
    /// 3x3; the error and the time are measured in docs/jit.md, "Points and error" and "3x3
    /// windows"). `TESSEL_WINOGRAD_TILE=f,d,w` (e.g. `2,2,2`) sets the three tiles, the
    /// switch for measuring error and speed; an unsupported tile declines Winograd for that
    /// convolution.
    fn tile(self) -> usize {
        let chosen = std::env::var("TESSEL_WINOGRAD_TILE").ok().and_then(|v| {
            let t: Vec<usize> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
            (t.len() == 3).then(|| t[self as usize])
        });
        chosen.unwrap_or(4)
    }

    /// How the forward routine's tile transforms sum. The data gradient's are factored by the
    /// points' ± pairs (fewer operations, the same error): its output decides no max-pool tie.
    /// The forward keeps the row-by-row sums, whose rounding the corpus's ties were matched
    /// with (docs/jit.md, "Points and error"). The weight-gradient routine is always factored.
    fn transform_order(self) -> TransformOrder {
        match self {
            Use::DataGradient => TransformOrder::Factored,
            Use::Forward | Use::FilterGradient => TransformOrder::RowByRow,
        }
    }
}

/// A forward convolution on Winograd, with its buffers.
#[derive(Clone, Debug)]
pub(crate) struct WinogradPlan {
    pub name: String,
    routine: WinogradConv,
    input: Addr,
    kernel: Addr,
    output: Addr,
    scratch: Addr,
    /// The bias and the max-pool it computes as it stores its output.
    pub(super) epilogue: ConvEpilogue,
}

impl WinogradPlan {
    /// Plans `output = conv(input, kernel)` if it has the shape this routine handles;
    /// `None` otherwise (nothing is allocated then).
    pub(crate) fn new(
        ops: &ConvOperands,
        threads: usize,
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> Option<WinogradPlan> {
        let (name, conv) = (ops.name, ops.conv);
        let (input, kernel, output) = (ops.input, ops.kernel, ops.output);
        let (idims, kdims, odims) = (f32_dims(input.1)?, f32_dims(kernel.1)?, f32_dims(output.1)?);
        let d = &conv.dims;
        let nhwc = |b: i64, sp: &[i64], f: i64| b == 0 && sp == [1, 2] && f == 3;
        if [&idims, &kdims, &odims].iter().any(|dims| dims.len() != 4)
            || conv.feature_group_count != 1
            || conv.batch_group_count != 1
            || !nhwc(d.input_batch, &d.input_spatial, d.input_feature)
            || !nhwc(d.output_batch, &d.output_spatial, d.output_feature)
            || d.kernel_spatial.len() != 2
            || conv.window.dims.len() != 2
        {
            return None;
        }
        let ks = [
            d.kernel_spatial[0] as usize,
            d.kernel_spatial[1] as usize,
            d.kernel_input_feature as usize,
            d.kernel_output_feature as usize,
        ];
        let r = kdims[ks[0]];
        let win = &conv.window.dims;
        let plain = win.iter().all(|w| {
            w.size as usize == r && w.stride == 1 && w.window_dilation == 1 && w.base_dilation == 1
        });
        let (batch, h, w, c) = (idims[0], idims[1], idims[2], idims[3]);
        let (oh, ow, o) = (odims[1], odims[2], odims[3]);
        let out_size =
            |inp: usize, wd: &WindowDim| inp as i64 + wd.pad_low + wd.pad_high - r as i64 + 1;
        if kdims[ks[1]] != r
            || !plain
            || kdims[ks[2]] != c
            || kdims[ks[3]] != o
            || odims[0] != batch
            || out_size(h, &win[0]) != oh as i64
            || out_size(w, &win[1]) != ow as i64
        {
            return None;
        }
        let geometry = Conv2dGeometry {
            batch,
            height: h,
            width: w,
            channels: c,
            window: [r, r],
            out_channels: o,
            padding: [0, 1].map(|i| (win[i].pad_low as isize, win[i].pad_high as isize)),
        };
        let kstrides = row_major_strides(&kdims);
        let layout = KernelLayout {
            strides: ks.map(|k| kstrides[k]),
            reversed: [win[0].reversal, win[1].reversal],
        };
        let use_ = if layout.reversed[0] {
            Use::DataGradient
        } else {
            Use::Forward
        };
        let routine = WinogradConv::with_tile(&geometry, layout, threads, use_.tile())
            .ok()?
            .with_transform_order(use_.transform_order());
        Some(WinogradPlan {
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

    /// The output tile `m` of F(m x m, r x r) it runs.
    pub(crate) fn tile(&self) -> usize {
        self.routine.tile()
    }

    /// # Safety
    /// `arena` must be the program's arena.
    pub(crate) unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        let (bias, pool) = self.epilogue.resolve(arena);
        self.routine.run_fused(
            resolve(self.input, arena) as *const f32,
            resolve(self.kernel, arena) as *const f32,
            bias,
            pool,
            resolve(self.output, arena) as *mut f32,
            resolve(self.scratch, arena),
        );
        Ok(())
    }
}

/// Called by generated code: `plan` is a `*const WinogradPlan` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `WinogradPlan` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn winograd_routine(
    plan: *const WinogradPlan,
    arena: *mut u8,
) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}

/// A weight gradient on the transposed Winograd algorithm, with its buffers.
#[derive(Clone, Debug)]
pub(crate) struct WinogradFilterPlan {
    pub name: String,
    routine: WinogradFilterGradient,
    input: Addr,
    grad: Addr,
    output: Addr,
    scratch: Addr,
}

impl WinogradFilterPlan {
    /// Plans `output = conv(input, grad)` if it is the weight gradient of a forward Winograd
    /// convolution in `f01b_i01o->01bf` labels (`X` as `[N, H, W, C]`, `dY` as `[N, OH, OW,
    /// K]`, the window spanning all of `dY`, the output `r x r` spatially in any layout);
    /// `None` otherwise (nothing is allocated then).
    pub(crate) fn new(
        ops: &ConvOperands,
        threads: usize,
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> Option<WinogradFilterPlan> {
        let (name, conv) = (ops.name, ops.conv);
        let (input, grad, output) = (ops.input, ops.kernel, ops.output);
        let (idims, gdims, odims) = (f32_dims(input.1)?, f32_dims(grad.1)?, f32_dims(output.1)?);
        let pads = plain_window(conv)?;
        let d = &conv.dims;
        if [&idims, &gdims, &odims].iter().any(|dims| dims.len() != 4)
            || (d.input_feature, d.input_batch) != (0, 3)
            || d.input_spatial != [1, 2]
            || (d.kernel_input_feature, d.kernel_output_feature) != (0, 3)
            || d.kernel_spatial != [1, 2]
            || d.output_spatial.len() != 2
        {
            return None;
        }
        let (batch, h, w, c) = (idims[0], idims[1], idims[2], idims[3]);
        let (oh, ow, k) = (gdims[1], gdims[2], gdims[3]);
        let od = [
            d.output_spatial[0] as usize,
            d.output_spatial[1] as usize,
            d.output_batch as usize,
            d.output_feature as usize,
        ];
        let r = odims[od[0]];
        // The window is as large as dY and slides over r x r positions of the padded X.
        let win = &conv.window.dims;
        let fits = |dim: usize, inp: usize, out: usize| {
            win[dim].size as usize == out && window_output(inp, pads[dim], out) == Some(r)
        };
        if odims[od[1]] != r
            || gdims[0] != batch
            || odims[od[2]] != c
            || odims[od[3]] != k
            || !fits(0, h, oh)
            || !fits(1, w, ow)
        {
            return None;
        }
        let geometry = Conv2dGeometry {
            batch,
            height: h,
            width: w,
            channels: c,
            window: [r, r],
            out_channels: k,
            padding: pads,
        };
        let ostrides = row_major_strides(&odims);
        let routine = WinogradFilterGradient::with_tile(
            &geometry,
            od.map(|i| ostrides[i]),
            threads,
            Use::FilterGradient.tile(),
        )
        .ok()?;
        Some(WinogradFilterPlan {
            name: name.to_string(),
            scratch: alloc(routine.scratch_bytes()),
            routine,
            input: input.0,
            grad: grad.0,
            output: output.0,
        })
    }

    /// The tile `m` of dY (F(m x m, r x r)) it runs.
    pub(crate) fn tile(&self) -> usize {
        self.routine.tile()
    }

    /// # Safety
    /// `arena` must be the program's arena.
    pub(crate) unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        self.routine.run(
            resolve(self.input, arena) as *const f32,
            resolve(self.grad, arena) as *const f32,
            resolve(self.output, arena) as *mut f32,
            resolve(self.scratch, arena),
        );
        Ok(())
    }
}

/// Called by generated code: `plan` is a `*const WinogradFilterPlan` the executable keeps
/// alive.
///
/// # Safety
/// `plan` must point to a live `WinogradFilterPlan` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn winograd_filter_routine(
    plan: *const WinogradFilterPlan,
    arena: *mut u8,
) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}
