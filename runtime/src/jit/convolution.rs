//! Convolution as im2col + GEMM, for any `dim_labels`, padding, stride, base (lhs) and window
//! (rhs) dilation, window reversal, feature groups and batch groups.
//!
//! Operands are first brought to the canonical layouts input `[N, spatial..., C]`, kernel
//! `[spatial..., I, O]`, output `[N, spatial..., O]` (a permuting copy into scratch space only
//! when the labels differ). Then, in chunks of output rows, the patches of the input are
//! gathered into a `[rows, window * I]` matrix (contiguous channel runs, zeros for padding)
//! and multiplied by the kernel seen as `[window * I, O]`. The gradient convolutions JAX emits
//! (`f01b_i01o->01bf`, `b01f_01oi->b01f` with a reversed kernel) are just other labels.

use super::buffer::Addr;
use super::gemm::{sgemm, GemmBackend};
use super::host::{guarded, permute_copy, resolve, Status};
use super::JitError;
use tessel_compiler::ir::{ArrayShape, Convolution, ElementType};

/// Largest patch matrix gathered at once, in elements.
const PATCH_ELEMS: usize = 1 << 20;

#[derive(Clone, Debug)]
pub struct ConvPlan {
    pub name: String,
    input: Addr,
    kernel: Addr,
    output: Addr,
    /// Permutations to the canonical layouts (source dims, order) and their scratch space.
    input_perm: Option<(Vec<usize>, Vec<usize>, Addr)>,
    kernel_perm: Option<(Vec<usize>, Vec<usize>, Addr)>,
    /// Canonical output scratch and the permutation from it to the real output.
    output_perm: Option<(Vec<usize>, Vec<usize>, Addr)>,
    patches: Addr,
    rows_per_chunk: usize,
    in_spatial: Vec<usize>,
    c_in: usize,
    k_spatial: Vec<usize>,
    i_per_group: usize,
    o_total: usize,
    n_out: usize,
    out_spatial: Vec<usize>,
    stride: Vec<i64>,
    pad_low: Vec<i64>,
    lhs_dil: Vec<i64>,
    rhs_dil: Vec<i64>,
    reversal: Vec<bool>,
    groups: usize,
    batch_groups: usize,
    backend: GemmBackend,
    threads: usize,
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
        let nsp = d.input_spatial.len();
        let u = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
        let mut in_order = vec![d.input_batch as usize];
        in_order.extend(u(&d.input_spatial));
        in_order.push(d.input_feature as usize);
        let mut k_order = u(&d.kernel_spatial);
        k_order.push(d.kernel_input_feature as usize);
        k_order.push(d.kernel_output_feature as usize);
        let mut out_order = vec![d.output_batch as usize];
        out_order.extend(u(&d.output_spatial));
        out_order.push(d.output_feature as usize);
        let (idims, kdims, odims) = (udims(input.1), udims(kernel.1), udims(output.1));
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
        let n_in = idims[in_order[0]];
        let c_in = idims[in_order[nsp + 1]];
        let in_spatial: Vec<usize> = in_order[1..=nsp].iter().map(|&i| idims[i]).collect();
        let k_spatial: Vec<usize> = k_order[..nsp].iter().map(|&i| kdims[i]).collect();
        let i_per_group = kdims[k_order[nsp]];
        let o_total = kdims[k_order[nsp + 1]];
        let n_out = canon_out[0];
        let out_spatial = canon_out[1..=nsp].to_vec();
        let groups = conv.feature_group_count.max(1) as usize;
        let batch_groups = conv.batch_group_count.max(1) as usize;
        if groups > 1 && batch_groups > 1 {
            return Err(JitError::Unsupported(format!(
                "{name}: feature and batch groups together"
            )));
        }
        if c_in != i_per_group * groups
            || o_total % (groups * batch_groups) != 0
            || n_in != n_out * batch_groups
        {
            return Err(JitError::Invalid(format!(
                "{name}: convolution group sizes do not match the operands"
            )));
        }
        let wdims = &conv.window.dims;
        if wdims.len() != nsp {
            return Err(JitError::Invalid(format!(
                "{name}: window rank does not match"
            )));
        }
        let window: usize = k_spatial.iter().product();
        let kcols = window * i_per_group;
        let rows_total = n_out * out_spatial.iter().product::<usize>();
        let rows_per_chunk = (PATCH_ELEMS / kcols.max(1)).max(64).min(rows_total.max(1));
        let patches = alloc(rows_per_chunk * kcols.max(1) * 4);
        Ok(ConvPlan {
            name: name.to_string(),
            input: input.0,
            kernel: kernel.0,
            output: output.0,
            input_perm: in_perm,
            kernel_perm: k_perm,
            output_perm: out_perm,
            patches,
            rows_per_chunk,
            in_spatial,
            c_in,
            k_spatial,
            i_per_group,
            o_total,
            n_out,
            out_spatial,
            stride: wdims.iter().map(|w| w.stride).collect(),
            pad_low: wdims.iter().map(|w| w.pad_low).collect(),
            lhs_dil: wdims.iter().map(|w| w.base_dilation).collect(),
            rhs_dil: wdims.iter().map(|w| w.window_dilation).collect(),
            reversal: wdims.iter().map(|w| w.reversal).collect(),
            groups,
            batch_groups,
            backend,
            threads,
        })
    }

    /// # Safety
    /// `arena` must be the program's arena.
    pub unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        let canon = |addr: Addr, perm: &Option<(Vec<usize>, Vec<usize>, Addr)>| -> *mut u8 {
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
        let patches = resolve(self.patches, arena) as *mut f32;
        self.compute(input, kernel, out, patches);
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

    unsafe fn compute(
        &self,
        input: *const f32,
        kernel: *const f32,
        out: *mut f32,
        patches: *mut f32,
    ) {
        let nsp = self.in_spatial.len();
        let window: usize = self.k_spatial.iter().product();
        let ig = self.i_per_group;
        let kcols = window * ig;
        let out_sp: usize = self.out_spatial.iter().product();
        let in_sp: usize = self.in_spatial.iter().product();
        let rows_total = self.n_out * out_sp;
        let o_per = self.o_total / (self.groups * self.batch_groups);
        // Per window position and spatial dimension: the offset `k * rhs_dilation - pad_low`
        // (with the window reversed where asked), computed once.
        let mut woff = vec![0i64; window * nsp];
        for w in 0..window {
            let mut wr = w;
            for d in (0..nsp).rev() {
                let k = wr % self.k_spatial[d];
                wr /= self.k_spatial[d];
                let k = if self.reversal[d] {
                    self.k_spatial[d] - 1 - k
                } else {
                    k
                } as i64;
                woff[w * nsp + d] = k * self.rhs_dil[d] - self.pad_low[d];
            }
        }
        let dilated = self.lhs_dil.iter().any(|&l| l != 1);
        let mut base = vec![0i64; nsp];
        for bg in 0..self.batch_groups {
            for g in 0..self.groups {
                let chan0 = g * ig;
                let ocol0 = (g + bg) * o_per;
                let mut row0 = 0;
                while row0 < rows_total {
                    let rows = self.rows_per_chunk.min(rows_total - row0);
                    // Gather the patch matrix for rows [row0, row0 + rows).
                    for r in 0..rows {
                        let row = row0 + r;
                        let n = row / out_sp + bg * self.n_out;
                        let mut rem = row % out_sp;
                        for d in (0..nsp).rev() {
                            base[d] = (rem % self.out_spatial[d]) as i64 * self.stride[d];
                            rem /= self.out_spatial[d];
                        }
                        let img = input.add(n * in_sp * self.c_in + chan0);
                        let prow = patches.add(r * kcols);
                        for w in 0..window {
                            let offs = &woff[w * nsp..(w + 1) * nsp];
                            let mut in_off = 0usize;
                            let mut valid = true;
                            for d in 0..nsp {
                                let mut p = base[d] + offs[d];
                                if dilated {
                                    let ld = self.lhs_dil[d];
                                    if p < 0 || p % ld != 0 {
                                        valid = false;
                                        break;
                                    }
                                    p /= ld;
                                }
                                if p < 0 || p >= self.in_spatial[d] as i64 {
                                    valid = false;
                                    break;
                                }
                                in_off = in_off * self.in_spatial[d] + p as usize;
                            }
                            let dst = prow.add(w * ig);
                            if valid {
                                let src = img.add(in_off * self.c_in);
                                if ig == 1 {
                                    *dst = *src;
                                } else {
                                    std::ptr::copy_nonoverlapping(src, dst, ig);
                                }
                            } else if ig == 1 {
                                *dst = 0.0;
                            } else {
                                std::ptr::write_bytes(dst, 0, ig);
                            }
                        }
                    }
                    sgemm(
                        self.backend,
                        self.threads,
                        rows,
                        o_per,
                        kcols,
                        patches,
                        kcols as isize,
                        1,
                        kernel.add(ocol0),
                        self.o_total as isize,
                        1,
                        out.add(row0 * self.o_total + ocol0),
                        self.o_total as isize,
                        1,
                        false,
                    );
                    row0 += rows;
                }
            }
        }
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
