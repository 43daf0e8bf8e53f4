//! Convolution as patch matrix + GEMM, for any `dim_labels`, padding, stride, base (lhs) and
//! window (rhs) dilation, window reversal, feature groups and batch groups.
//!
//! Two formulations (`Form`), each with its canonical layouts; a permuting copy into scratch
//! space brings an operand to them only when its labels differ:
//! - `Rows` (im2col): input `[N, spatial..., C]`, kernel `[spatial..., I, O]`, output
//!   `[N, spatial..., O]`. In chunks of output points, the patches of the input are gathered
//!   into a `[rows, window * I]` matrix and multiplied by the kernel seen as `[window * I, O]`.
//!   Forward convolutions and the data gradient (`b01f_01oi->b01f`, reversed kernel) use it.
//! - `Columns`: input `[C, spatial..., N]`, kernel `[I, spatial..., O]`, output
//!   `[spatial..., N, O]`, i.e. exactly the weight-gradient labels JAX emits
//!   (`f01b_i01o->01bf`), so nothing is permuted. The patch matrix has one row per (input
//!   feature, kernel position) and one column per (output position, batch):
//!   `out = patches^T * kernel`, gathered and multiplied in chunks of rows with the products
//!   accumulated. It is chosen when the kernel window is larger than the output (a weight
//!   gradient), without feature or batch groups.
//!
//! Chunks are shared among `threads` workers (`jit::parallel`), each with its own patch
//! buffer and a single-threaded GEMM, so gathering runs in parallel too.

use super::buffer::Addr;
use super::conv_patches::{PatchGrid, MAX_SPATIAL};
use super::gemm::{sgemm, GemmBackend};
use super::host::{guarded, permute_copy, resolve, Status};
use super::parallel::{for_each_worker, Shared};
use super::JitError;
use std::sync::atomic::{AtomicUsize, Ordering};
use tessel_compiler::ir::{ArrayShape, Convolution, ElementType};

/// Largest patch matrix chunk one worker gathers at once, in elements (fits in L2 cache).
const PATCH_ELEMS: usize = 1 << 17;

/// Which GEMM formulation a convolution uses (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Rows,
    Columns,
}

#[derive(Clone, Debug)]
pub struct ConvPlan {
    pub name: String,
    form: Form,
    input: Addr,
    kernel: Addr,
    output: Addr,
    /// Permutations to the canonical layouts (source dims, order) and their scratch space.
    input_perm: Option<(Vec<usize>, Vec<usize>, Addr)>,
    kernel_perm: Option<(Vec<usize>, Vec<usize>, Addr)>,
    /// Canonical output scratch and the permutation from it to the real output.
    output_perm: Option<(Vec<usize>, Vec<usize>, Addr)>,
    /// One patch chunk per worker, `patch_elems` floats apart.
    patches: Addr,
    patch_elems: usize,
    /// Patch rows per chunk.
    rows_per_chunk: usize,
    /// `Columns` form: partial products of workers 1.. (`out_elems` floats each).
    partials: Addr,
    workers: usize,
    in_spatial: Vec<usize>,
    c_in: usize,
    n_in: usize,
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
        let (idims, kdims, odims) = (udims(input.1), udims(kernel.1), udims(output.1));
        let in_spatial: Vec<usize> = u(&d.input_spatial).iter().map(|&i| idims[i]).collect();
        let k_spatial: Vec<usize> = u(&d.kernel_spatial).iter().map(|&i| kdims[i]).collect();
        let out_spatial: Vec<usize> = u(&d.output_spatial).iter().map(|&i| odims[i]).collect();
        let n_in = idims[d.input_batch as usize];
        let c_in = idims[d.input_feature as usize];
        let i_per_group = kdims[d.kernel_input_feature as usize];
        let o_total = kdims[d.kernel_output_feature as usize];
        let n_out = odims[d.output_batch as usize];
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
        if nsp > MAX_SPATIAL {
            return Err(JitError::Unsupported(format!(
                "{name}: convolution with more than {MAX_SPATIAL} spatial dimensions"
            )));
        }
        if wdims.len() != nsp {
            return Err(JitError::Invalid(format!(
                "{name}: window rank does not match"
            )));
        }
        let window: usize = k_spatial.iter().product();
        let out_sp: usize = out_spatial.iter().product();
        let form = if groups == 1 && batch_groups == 1 && window > out_sp {
            Form::Columns
        } else {
            Form::Rows
        };
        let (in_order, k_order, out_order) = match form {
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
        // Patch matrix: rows x cols, chunked along the rows.
        let (rows_total, cols) = match form {
            Form::Rows => (n_out * out_sp, window * i_per_group),
            Form::Columns => (c_in * window, out_sp * n_out),
        };
        let threads = threads.max(1);
        let per_worker = rows_total.div_ceil(threads).max(1);
        let rows_per_chunk = (PATCH_ELEMS / cols.max(1)).clamp(1, per_worker);
        let patch_elems = rows_per_chunk * cols.max(1);
        // Work items: chunks (Rows: for every feature / batch group).
        let items = rows_total.div_ceil(rows_per_chunk)
            * match form {
                Form::Rows => groups * batch_groups,
                Form::Columns => 1,
            };
        let workers = threads.min(items).max(1);
        let patches = alloc(patch_elems * workers * 4);
        let out_elems = out_sp * n_out * o_total;
        let partials = if form == Form::Columns && workers > 1 {
            alloc(out_elems * (workers - 1) * 4)
        } else {
            patches
        };
        Ok(ConvPlan {
            name: name.to_string(),
            form,
            input: input.0,
            kernel: kernel.0,
            output: output.0,
            input_perm: in_perm,
            kernel_perm: k_perm,
            output_perm: out_perm,
            patches,
            patch_elems,
            rows_per_chunk,
            partials,
            workers,
            in_spatial,
            c_in,
            n_in,
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
        match self.form {
            Form::Rows => self.compute_rows(input, kernel, out, patches),
            Form::Columns => {
                let partials = resolve(self.partials, arena) as *mut f32;
                self.compute_columns(input, kernel, out, patches, partials)
            }
        }
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

    /// Per kernel position and spatial dimension: the input offset `k * rhs_dilation - pad_low`
    /// (with the window reversed where asked).
    fn window_offsets(&self) -> Vec<i64> {
        let nsp = self.in_spatial.len();
        let window: usize = self.k_spatial.iter().product();
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
        woff
    }

    /// Per output position and spatial dimension: `out * stride`.
    fn output_offsets(&self) -> Vec<i64> {
        let nsp = self.in_spatial.len();
        let out_sp: usize = self.out_spatial.iter().product();
        let mut ooff = vec![0i64; out_sp * nsp];
        for p in 0..out_sp {
            let mut rem = p;
            for d in (0..nsp).rev() {
                ooff[p * nsp + d] = (rem % self.out_spatial[d]) as i64 * self.stride[d];
                rem /= self.out_spatial[d];
            }
        }
        ooff
    }

    /// The positions one patch row visits: the window offsets (`Rows`) or the output
    /// positions times the stride (`Columns`), per spatial dimension.
    fn grid(&self) -> PatchGrid {
        let nsp = self.in_spatial.len();
        let lists = (0..nsp)
            .map(|d| match self.form {
                Form::Rows => (0..self.k_spatial[d])
                    .map(|k| {
                        let k = if self.reversal[d] {
                            self.k_spatial[d] - 1 - k
                        } else {
                            k
                        };
                        k as i64 * self.rhs_dil[d] - self.pad_low[d]
                    })
                    .collect(),
                Form::Columns => (0..self.out_spatial[d])
                    .map(|p| p as i64 * self.stride[d])
                    .collect(),
            })
            .collect();
        PatchGrid::new(self.in_spatial.clone(), self.lhs_dil.clone(), lists)
    }

    /// `Rows` form: chunks of output points, taken by the workers in turn.
    unsafe fn compute_rows(
        &self,
        input: *const f32,
        kernel: *const f32,
        out: *mut f32,
        patches: *mut f32,
    ) {
        let nsp = self.in_spatial.len();
        let ig = self.i_per_group;
        let window: usize = self.k_spatial.iter().product();
        let kcols = window * ig;
        let out_sp: usize = self.out_spatial.iter().product();
        let in_sp: usize = self.in_spatial.iter().product();
        let rows_total = self.n_out * out_sp;
        let o_per = self.o_total / (self.groups * self.batch_groups);
        let ooff = self.output_offsets();
        let grid = self.grid();
        let chunks = rows_total.div_ceil(self.rows_per_chunk);
        let items = self.batch_groups * self.groups * chunks;
        let next = AtomicUsize::new(0);
        let (input, kernel, out, patches) = (
            Shared(input as *mut f32),
            Shared(kernel as *mut f32),
            Shared(out),
            Shared(patches),
        );
        for_each_worker(self.workers, |w| {
            let patch = patches.get().add(w * self.patch_elems);
            loop {
                let item = next.fetch_add(1, Ordering::Relaxed);
                if item >= items {
                    break;
                }
                let (bgg, chunk) = (item / chunks, item % chunks);
                let (bg, g) = (bgg / self.groups, bgg % self.groups);
                let chan0 = g * ig;
                let ocol0 = (g + bg) * o_per;
                let row0 = chunk * self.rows_per_chunk;
                let rows = self.rows_per_chunk.min(rows_total - row0);
                for r in 0..rows {
                    let row = row0 + r;
                    let n = row / out_sp + bg * self.n_out;
                    let p = row % out_sp;
                    let img = input.get().add(n * in_sp * self.c_in + chan0);
                    grid.gather_row(
                        img,
                        self.c_in,
                        ig,
                        &ooff[p * nsp..(p + 1) * nsp],
                        patch.add(r * kcols),
                    );
                }
                sgemm(
                    self.backend,
                    1,
                    rows,
                    o_per,
                    kcols,
                    patch,
                    kcols as isize,
                    1,
                    kernel.get().add(ocol0),
                    self.o_total as isize,
                    1,
                    out.get().add(row0 * self.o_total + ocol0),
                    self.o_total as isize,
                    1,
                    false,
                );
            }
        });
    }

    /// `Columns` form: worker `w` takes a contiguous share of the patch rows (input feature,
    /// kernel position) and accumulates its products into the output (worker 0) or its
    /// partial buffer; the partials are added at the end.
    unsafe fn compute_columns(
        &self,
        input: *const f32,
        kernel: *const f32,
        out: *mut f32,
        patches: *mut f32,
        partials: *mut f32,
    ) {
        let nsp = self.in_spatial.len();
        let window: usize = self.k_spatial.iter().product();
        let out_sp: usize = self.out_spatial.iter().product();
        let in_sp: usize = self.in_spatial.iter().product();
        let batch = self.n_in;
        let m = out_sp * batch;
        let o = self.o_total;
        let out_elems = m * o;
        let rows_total = self.c_in * window;
        let woff = self.window_offsets();
        let grid = self.grid();
        let chunks = rows_total.div_ceil(self.rows_per_chunk);
        let workers = self.workers;
        let (input, kernel, out, patches, partials) = (
            Shared(input as *mut f32),
            Shared(kernel as *mut f32),
            Shared(out),
            Shared(patches),
            Shared(partials),
        );
        for_each_worker(workers, |w| {
            let patch = patches.get().add(w * self.patch_elems);
            let acc = if w == 0 {
                out.get()
            } else {
                partials.get().add((w - 1) * out_elems)
            };
            let (c0, c1) = (chunks * w / workers, chunks * (w + 1) / workers);
            if c0 == c1 {
                std::ptr::write_bytes(acc, 0, out_elems);
            }
            for chunk in c0..c1 {
                let row0 = chunk * self.rows_per_chunk;
                let rows = self.rows_per_chunk.min(rows_total - row0);
                for r in 0..rows {
                    let (i, k) = ((row0 + r) / window, (row0 + r) % window);
                    grid.gather_row(
                        input.get().add(i * in_sp * batch),
                        batch,
                        batch,
                        &woff[k * nsp..(k + 1) * nsp],
                        patch.add(r * m),
                    );
                }
                sgemm(
                    self.backend,
                    1,
                    m,
                    o,
                    rows,
                    patch,
                    1,
                    m as isize,
                    kernel.get().add(row0 * o),
                    o as isize,
                    1,
                    acc,
                    o as isize,
                    1,
                    chunk != c0,
                );
            }
        });
        for w in 1..workers {
            let part = partials.get().add((w - 1) * out_elems);
            for j in 0..out_elems {
                *out.get().add(j) += *part.add(j);
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
