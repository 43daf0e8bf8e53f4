//! Plans for the kernels crate's general convolution (`tessel_kernels::patch_gemm`), which
//! handles every convolution the IR can express: any `dim_labels`, padding, stride, base and
//! window dilation, window reversal, feature groups and batch groups.
//!
//! The crate's routine works in the canonical layouts of its formulation (`Form`); a
//! permuting copy into scratch space brings an operand to them, and the output back from
//! them, only when the convolution's labels differ.

use crate::jit::buffer::Addr;
use crate::jit::host::{guarded, permute_copy, resolve, Status};
use crate::jit::JitError;
use tessel_compiler::ir::{ArrayShape, Convolution, ElementType};
use tessel_kernels::gemm::GemmBackend;
use tessel_kernels::patch_gemm::{ConvGeometry, Form, PatchConv};
use tessel_kernels::KernelError;

/// A permutation to or from a canonical layout: source dims, destination order, and the
/// scratch space of the permuted copy.
type Permutation = Option<(Vec<usize>, Vec<usize>, Addr)>;

/// A convolution on the patch-matrix GEMM, with its buffers.
#[derive(Clone, Debug)]
pub struct ConvPlan {
    pub name: String,
    routine: PatchConv,
    input: Addr,
    kernel: Addr,
    output: Addr,
    /// Permutations to the canonical layouts.
    input_perm: Permutation,
    kernel_perm: Permutation,
    /// Canonical output scratch and the permutation from it to the real output.
    output_perm: Permutation,
    scratch: Addr,
}

fn udims(s: &ArrayShape) -> Vec<usize> {
    s.dims.iter().map(|&d| d as usize).collect()
}

fn is_identity(p: &[usize]) -> bool {
    p.iter().enumerate().all(|(i, &x)| i == x)
}

impl ConvPlan {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        conv: &Convolution,
        input: (Addr, &ArrayShape),
        kernel: (Addr, &ArrayShape),
        output: (Addr, &ArrayShape),
        backend: GemmBackend,
        threads: usize,
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> Result<ConvPlan, JitError> {
        if input.1.element_type != ElementType::F32 || kernel.1.element_type != ElementType::F32 {
            return Err(JitError::Unsupported(format!(
                "convolution of {} (only f32)",
                input.1.element_type
            )));
        }
        let d = &conv.dims;
        let u = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
        let (idims, kdims, odims) = (udims(input.1), udims(kernel.1), udims(output.1));
        let wdims = &conv.window.dims;
        let geometry = ConvGeometry {
            batch: idims[d.input_batch as usize],
            channels: idims[d.input_feature as usize],
            spatial: u(&d.input_spatial).iter().map(|&i| idims[i]).collect(),
            window: u(&d.kernel_spatial).iter().map(|&i| kdims[i]).collect(),
            in_per_group: kdims[d.kernel_input_feature as usize],
            out_features: kdims[d.kernel_output_feature as usize],
            out_batch: odims[d.output_batch as usize],
            out_spatial: u(&d.output_spatial).iter().map(|&i| odims[i]).collect(),
            stride: wdims.iter().map(|w| w.stride).collect(),
            pad_low: wdims.iter().map(|w| w.pad_low).collect(),
            base_dilation: wdims.iter().map(|w| w.base_dilation).collect(),
            window_dilation: wdims.iter().map(|w| w.window_dilation).collect(),
            reversal: wdims.iter().map(|w| w.reversal).collect(),
            feature_groups: conv.feature_group_count.max(1) as usize,
            batch_groups: conv.batch_group_count.max(1) as usize,
        };
        let routine = PatchConv::new(geometry, backend, threads).map_err(|e| match e {
            KernelError::Invalid(m) => JitError::Invalid(format!("{name}: {m}")),
            other => JitError::Unsupported(format!("{name}: {other}")),
        })?;
        let (in_order, k_order, out_order) = match routine.form() {
            Form::Rows => (
                [
                    vec![d.input_batch as usize],
                    u(&d.input_spatial),
                    vec![d.input_feature as usize],
                ],
                [
                    u(&d.kernel_spatial),
                    vec![d.kernel_input_feature as usize],
                    vec![d.kernel_output_feature as usize],
                ],
                [
                    vec![d.output_batch as usize],
                    u(&d.output_spatial),
                    vec![d.output_feature as usize],
                ],
            ),
            Form::Columns => (
                [
                    vec![d.input_feature as usize],
                    u(&d.input_spatial),
                    vec![d.input_batch as usize],
                ],
                [
                    vec![d.kernel_input_feature as usize],
                    u(&d.kernel_spatial),
                    vec![d.kernel_output_feature as usize],
                ],
                [
                    u(&d.output_spatial),
                    vec![d.output_batch as usize],
                    vec![d.output_feature as usize],
                ],
            ),
        };
        let (in_order, k_order, out_order) =
            (in_order.concat(), k_order.concat(), out_order.concat());
        let in_perm = (!is_identity(&in_order)).then(|| {
            (
                idims.clone(),
                in_order.clone(),
                alloc(input.1.byte_size() as usize),
            )
        });
        let k_perm = (!is_identity(&k_order)).then(|| {
            (
                kdims.clone(),
                k_order.clone(),
                alloc(kernel.1.byte_size() as usize),
            )
        });
        // Canonical output dims, and for each real output dim its canonical position.
        let canon_out: Vec<usize> = out_order.iter().map(|&o| odims[o]).collect();
        let mut back = vec![0usize; out_order.len()];
        for (ci, &o) in out_order.iter().enumerate() {
            back[o] = ci;
        }
        let out_perm = (!is_identity(&out_order)).then(|| {
            (
                canon_out.clone(),
                back,
                alloc(output.1.byte_size() as usize),
            )
        });
        Ok(ConvPlan {
            name: name.to_string(),
            scratch: alloc(routine.scratch_bytes()),
            routine,
            input: input.0,
            kernel: kernel.0,
            output: output.0,
            input_perm: in_perm,
            kernel_perm: k_perm,
            output_perm: out_perm,
        })
    }

    /// # Safety
    /// `arena` must be the program's arena.
    pub unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        let canon = |addr: Addr, perm: &Permutation| -> *mut u8 {
            let src = resolve(addr, arena);
            match perm {
                None => src,
                Some((dims, order, scratch)) => {
                    let dst = resolve(*scratch, arena);
                    permute_copy(src, dims, order, dst, 4);
                    dst
                }
            }
        };
        let input = canon(self.input, &self.input_perm) as *const f32;
        let kernel = canon(self.kernel, &self.kernel_perm) as *const f32;
        let out = match &self.output_perm {
            None => resolve(self.output, arena),
            Some((_, _, scratch)) => resolve(*scratch, arena),
        } as *mut f32;
        self.routine
            .run(input, kernel, out, resolve(self.scratch, arena));
        if let Some((dims, order, scratch)) = &self.output_perm {
            permute_copy(
                resolve(*scratch, arena),
                dims,
                order,
                resolve(self.output, arena),
                4,
            );
        }
        Ok(())
    }
}

/// Called by generated code: `plan` is a `*const ConvPlan` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `ConvPlan` and `arena` be the program's arena.
pub unsafe extern "C" fn conv_routine(plan: *const ConvPlan, arena: *mut u8) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}
