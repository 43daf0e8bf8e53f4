//! Convolution as patch matrix + GEMM ([`PatchConv`]), for any padding, stride, base (lhs) and
//! window (rhs) dilation, window reversal, feature groups and batch groups.
//!
//! Two formulations ([`Form`]), each with its canonical layouts (the caller brings the
//! operands to them, by a permuting copy where its layouts differ):
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
//! Chunks are shared among `threads` workers (`parallel.rs`), each with its own patch
//! buffer and a single-threaded GEMM, so gathering runs in parallel too. They are taken as
//! threads become free: `Rows` cuts about `CHUNKS_PER_THREAD` chunks per thread; `Columns`
//! sums fixed groups of chunks into partials added in a fixed order, so its result is the
//! same on any number of threads.

pub mod gather;

use crate::gemm::{sgemm, GemmBackend};
use crate::parallel::{
    chunk_len, for_each_range, for_each_share_on_slots, for_each_worker, Shared, CHUNKS_PER_THREAD,
};
use crate::scratch::{floats, Scratch};
use crate::KernelError;
use gather::{PatchGrid, MAX_SPATIAL};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest patch matrix chunk one worker gathers at once, in elements (fits in L2 cache).
const PATCH_ELEMS: usize = 1 << 17;

/// `Columns` form: the chunks are cut into at most this many fixed groups (shares), each
/// summed into its own partial, so that threads take shares as they become free and the
/// sums do not depend on the thread count.
const COLUMN_SHARES: usize = 8;

/// Bytes the `Columns` form's partials may take in all (beyond it, fewer shares).
const PARTIAL_BYTES: usize = 32 << 20;

/// Shares of the `Columns` form for `chunks` chunks of an output of `out_elems` floats: a
/// function of the shape only.
fn column_shares(chunks: usize, out_elems: usize) -> usize {
    let by_memory = PARTIAL_BYTES / (out_elems * 4).max(1) + 1;
    COLUMN_SHARES.min(by_memory).min(chunks).max(1)
}

/// Which GEMM formulation a convolution uses, and so the layouts of its operands (see the
/// module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Input `[N, spatial..., C]`, kernel `[spatial..., I, O]`, output `[N, spatial..., O]`.
    Rows,
    /// Input `[C, spatial..., N]`, kernel `[I, spatial..., O]`, output `[spatial..., N, O]`.
    Columns,
}

/// Any convolution: sizes per spatial dimension, and the window's steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    /// Input batch and features.
    pub batch: usize,
    pub channels: usize,
    pub spatial: Vec<usize>,
    /// Kernel spatial sizes, input features per group and output features.
    pub window: Vec<usize>,
    pub in_per_group: usize,
    pub out_features: usize,
    /// Output batch and spatial sizes.
    pub out_batch: usize,
    pub out_spatial: Vec<usize>,
    /// Per spatial dimension: stride, low padding, base (input) dilation, window dilation,
    /// reversal.
    pub stride: Vec<i64>,
    pub pad_low: Vec<i64>,
    pub base_dilation: Vec<i64>,
    pub window_dilation: Vec<i64>,
    pub reversal: Vec<bool>,
    pub feature_groups: usize,
    pub batch_groups: usize,
}

/// A planned convolution.
#[derive(Clone, Debug)]
pub struct PatchConv {
    g: ConvGeometry,
    form: Form,
    /// One patch chunk per worker, `patch_elems` floats apart (scratch offset).
    patches: usize,
    patch_elems: usize,
    /// Patch rows per chunk.
    rows_per_chunk: usize,
    /// `Columns` form: partial products of shares 1.. (`out_elems` floats each; scratch
    /// offset).
    partials: usize,
    /// `Columns` form: the fixed groups of consecutive chunks, each summed into its own
    /// partial (share 0 into the output) by whichever thread takes it.
    shares: usize,
    scratch: Scratch,
    workers: usize,
    backend: GemmBackend,
}

impl PatchConv {
    /// Plans `geometry` with GEMM library `backend` on `threads` workers.
    pub fn new(
        geometry: ConvGeometry,
        backend: GemmBackend,
        threads: usize,
    ) -> Result<PatchConv, KernelError> {
        let g = geometry;
        let nsp = g.spatial.len();
        let (groups, batch_groups) = (g.feature_groups.max(1), g.batch_groups.max(1));
        if groups > 1 && batch_groups > 1 {
            return Err(KernelError::Unsupported(
                "feature and batch groups together".into(),
            ));
        }
        if g.channels != g.in_per_group * groups
            || !g.out_features.is_multiple_of(groups * batch_groups)
            || g.batch != g.out_batch * batch_groups
        {
            return Err(KernelError::Invalid(
                "convolution group sizes do not match the operands".into(),
            ));
        }
        if nsp > MAX_SPATIAL {
            return Err(KernelError::Unsupported(format!(
                "convolution with more than {MAX_SPATIAL} spatial dimensions"
            )));
        }
        let per_dim = [
            g.window.len(),
            g.out_spatial.len(),
            g.stride.len(),
            g.pad_low.len(),
            g.base_dilation.len(),
            g.window_dilation.len(),
            g.reversal.len(),
        ];
        if per_dim.iter().any(|&len| len != nsp) {
            return Err(KernelError::Invalid("window rank does not match".into()));
        }
        let window: usize = g.window.iter().product();
        let out_sp: usize = g.out_spatial.iter().product();
        let form = if groups == 1 && batch_groups == 1 && window > out_sp {
            Form::Columns
        } else {
            Form::Rows
        };
        // Patch matrix: rows x cols, chunked along the rows.
        let (rows_total, cols) = match form {
            Form::Rows => (g.out_batch * out_sp, window * g.in_per_group),
            Form::Columns => (g.channels * window, out_sp * g.out_batch),
        };
        let threads = threads.max(1);
        let out_elems = out_sp * g.out_batch * g.out_features;
        // Rows: several chunks per thread, taken as threads become free. Columns: at least one
        // chunk per share, the chunks fixed by the shape alone (they fix the sums' order).
        let most_rows = match form {
            Form::Rows => rows_total.div_ceil(threads * CHUNKS_PER_THREAD),
            Form::Columns => rows_total.div_ceil(column_shares(rows_total, out_elems)),
        };
        let rows_per_chunk = (PATCH_ELEMS / cols.max(1)).clamp(1, most_rows.max(1));
        let patch_elems = rows_per_chunk * cols.max(1);
        // Work items: chunks (Rows: for every feature / batch group).
        let items = rows_total.div_ceil(rows_per_chunk)
            * match form {
                Form::Rows => groups * batch_groups,
                Form::Columns => 1,
            };
        let shares = match form {
            Form::Rows => items,
            Form::Columns => column_shares(items, out_elems),
        };
        let workers = threads.min(shares).max(1);
        let mut scratch = Scratch::default();
        let patches = scratch.region(patch_elems * workers * 4);
        let partials = if form == Form::Columns && shares > 1 {
            scratch.region(out_elems * (shares - 1) * 4)
        } else {
            patches
        };
        Ok(PatchConv {
            g: ConvGeometry {
                feature_groups: groups,
                batch_groups,
                ..g
            },
            form,
            patches,
            patch_elems,
            rows_per_chunk,
            partials,
            shares,
            scratch,
            workers,
            backend,
        })
    }

    /// The formulation, which fixes the operands' layouts.
    pub fn form(&self) -> Form {
        self.form
    }

    /// Bytes of scratch memory [`Self::run`] needs.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// `output = conv(input, kernel)`, all three in the layouts of [`Self::form`].
    ///
    /// # Safety
    /// The pointers must hold the arrays of the geometry, row-major in those layouts, and
    /// `scratch` [`Self::scratch_bytes`] bytes, 64-byte aligned.
    pub unsafe fn run(
        &self,
        input: *const f32,
        kernel: *const f32,
        output: *mut f32,
        scratch: *mut u8,
    ) {
        let patches = floats(scratch, self.patches);
        match self.form {
            Form::Rows => self.compute_rows(input, kernel, output, patches),
            Form::Columns => {
                let partials = floats(scratch, self.partials);
                self.compute_columns(input, kernel, output, patches, partials)
            }
        }
    }

    /// Per kernel position and spatial dimension: the input offset `k * rhs_dilation - pad_low`
    /// (with the window reversed where asked).
    fn window_offsets(&self) -> Vec<i64> {
        let nsp = self.g.spatial.len();
        let window: usize = self.g.window.iter().product();
        let mut woff = vec![0i64; window * nsp];
        for w in 0..window {
            let mut wr = w;
            for d in (0..nsp).rev() {
                let k = wr % self.g.window[d];
                wr /= self.g.window[d];
                let k = if self.g.reversal[d] {
                    self.g.window[d] - 1 - k
                } else {
                    k
                } as i64;
                woff[w * nsp + d] = k * self.g.window_dilation[d] - self.g.pad_low[d];
            }
        }
        woff
    }

    /// Per output position and spatial dimension: `out * stride`.
    fn output_offsets(&self) -> Vec<i64> {
        let nsp = self.g.spatial.len();
        let out_sp: usize = self.g.out_spatial.iter().product();
        let mut ooff = vec![0i64; out_sp * nsp];
        for p in 0..out_sp {
            let mut rem = p;
            for d in (0..nsp).rev() {
                ooff[p * nsp + d] = (rem % self.g.out_spatial[d]) as i64 * self.g.stride[d];
                rem /= self.g.out_spatial[d];
            }
        }
        ooff
    }

    /// The positions one patch row visits: the window offsets (`Rows`) or the output
    /// positions times the stride (`Columns`), per spatial dimension.
    fn grid(&self) -> PatchGrid {
        let nsp = self.g.spatial.len();
        let lists = (0..nsp)
            .map(|d| match self.form {
                Form::Rows => (0..self.g.window[d])
                    .map(|k| {
                        let k = if self.g.reversal[d] {
                            self.g.window[d] - 1 - k
                        } else {
                            k
                        };
                        k as i64 * self.g.window_dilation[d] - self.g.pad_low[d]
                    })
                    .collect(),
                Form::Columns => (0..self.g.out_spatial[d])
                    .map(|p| p as i64 * self.g.stride[d])
                    .collect(),
            })
            .collect();
        PatchGrid::new(self.g.spatial.clone(), self.g.base_dilation.clone(), lists)
    }

    /// `Rows` form: chunks of output points, taken by the workers in turn.
    unsafe fn compute_rows(
        &self,
        input: *const f32,
        kernel: *const f32,
        out: *mut f32,
        patches: *mut f32,
    ) {
        let nsp = self.g.spatial.len();
        let ig = self.g.in_per_group;
        let window: usize = self.g.window.iter().product();
        let kcols = window * ig;
        let out_sp: usize = self.g.out_spatial.iter().product();
        let in_sp: usize = self.g.spatial.iter().product();
        let rows_total = self.g.out_batch * out_sp;
        let o_per = self.g.out_features / (self.g.feature_groups * self.g.batch_groups);
        let ooff = self.output_offsets();
        let grid = self.grid();
        let chunks = rows_total.div_ceil(self.rows_per_chunk);
        let items = self.g.batch_groups * self.g.feature_groups * chunks;
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
                let (bg, g) = (bgg / self.g.feature_groups, bgg % self.g.feature_groups);
                let chan0 = g * ig;
                let ocol0 = (g + bg) * o_per;
                let row0 = chunk * self.rows_per_chunk;
                let rows = self.rows_per_chunk.min(rows_total - row0);
                for r in 0..rows {
                    let row = row0 + r;
                    let n = row / out_sp + bg * self.g.out_batch;
                    let p = row % out_sp;
                    let img = input.get().add(n * in_sp * self.g.channels + chan0);
                    grid.gather_row(
                        img,
                        self.g.channels,
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
                    self.g.out_features as isize,
                    1,
                    out.get().add(row0 * self.g.out_features + ocol0),
                    self.g.out_features as isize,
                    1,
                    false,
                );
            }
        });
    }

    /// `Columns` form: share `s`, a fixed group of consecutive chunks of the patch rows (input
    /// feature, kernel position), accumulates its products into the output (share 0) or its
    /// partial buffer, on whichever thread takes it; the partials are added at the end in
    /// share order, so any thread count gives the same bits.
    unsafe fn compute_columns(
        &self,
        input: *const f32,
        kernel: *const f32,
        out: *mut f32,
        patches: *mut f32,
        partials: *mut f32,
    ) {
        let nsp = self.g.spatial.len();
        let window: usize = self.g.window.iter().product();
        let out_sp: usize = self.g.out_spatial.iter().product();
        let in_sp: usize = self.g.spatial.iter().product();
        let batch = self.g.batch;
        let m = out_sp * batch;
        let o = self.g.out_features;
        let out_elems = m * o;
        let rows_total = self.g.channels * window;
        let woff = self.window_offsets();
        let grid = self.grid();
        let chunks = rows_total.div_ceil(self.rows_per_chunk);
        let shares = self.shares;
        let (input, kernel, out, patches, partials) = (
            Shared(input as *mut f32),
            Shared(kernel as *mut f32),
            Shared(out),
            Shared(patches),
            Shared(partials),
        );
        for_each_share_on_slots(shares, self.workers, |slot, w| {
            let patch = patches.get().add(slot * self.patch_elems);
            let acc = if w == 0 {
                out.get()
            } else {
                partials.get().add((w - 1) * out_elems)
            };
            let (c0, c1) = (chunks * w / shares, chunks * (w + 1) / shares);
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
        // Each element sums the partials in share order; the elements are cut among threads.
        let elems = chunk_len(out_elems, self.workers, 16);
        for_each_range(out_elems, elems, self.workers, |j0, j1| {
            for s in 1..shares {
                let part = partials.get().add((s - 1) * out_elems);
                for j in j0..j1 {
                    *out.get().add(j) += *part.add(j);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::scratch_block;

    /// A weight gradient in the `Columns` form (20 images summed, 3 input channels, 5 output
    /// channels, a 7x7 window over 9x9, so a 3x3 result): its fixed shares give bitwise the
    /// same result on 1, 2 and 3 threads, which matches a direct sum.
    #[test]
    fn column_shares_give_the_same_bits_on_any_thread_count() {
        let (imgs, cin, cout, side, win) = (20usize, 3usize, 5usize, 9usize, 7usize);
        let out_side = side - win + 1;
        let geometry = ConvGeometry {
            batch: cin,
            channels: imgs,
            spatial: vec![side, side],
            window: vec![win, win],
            in_per_group: imgs,
            out_features: cout,
            out_batch: cin,
            out_spatial: vec![out_side, out_side],
            stride: vec![1, 1],
            pad_low: vec![0, 0],
            base_dilation: vec![1, 1],
            window_dilation: vec![1, 1],
            reversal: vec![false, false],
            feature_groups: 1,
            batch_groups: 1,
        };
        // Input [imgs, side, side, cin]; kernel [imgs, win, win, cout].
        let input: Vec<f32> = (0..imgs * side * side * cin)
            .map(|i| ((i * 7919) % 23) as f32 / 5.0 - 2.0)
            .collect();
        let kernel: Vec<f32> = (0..imgs * win * win * cout)
            .map(|i| ((i * 104729) % 19) as f32 / 7.0 - 1.25)
            .collect();
        let run = |threads: usize| {
            let plan = PatchConv::new(geometry.clone(), GemmBackend::Gemm, threads).unwrap();
            assert_eq!(plan.form(), Form::Columns);
            assert!(plan.shares > threads, "{} shares", plan.shares);
            let mut out = vec![f32::NAN; out_side * out_side * cin * cout];
            let mut scratch = scratch_block(plan.scratch_bytes());
            unsafe {
                plan.run(
                    input.as_ptr(),
                    kernel.as_ptr(),
                    out.as_mut_ptr(),
                    scratch.as_mut_ptr() as *mut u8,
                )
            };
            out
        };
        let one = run(1);
        for threads in [2, 3] {
            let got = run(threads);
            assert!(
                one.iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{threads} threads differ from one"
            );
        }
        for oy in 0..out_side {
            for ox in 0..out_side {
                for n in 0..cin {
                    for o in 0..cout {
                        let mut want = 0f64;
                        for c in 0..imgs {
                            for ky in 0..win {
                                for kx in 0..win {
                                    let x =
                                        input[((c * side + oy + ky) * side + ox + kx) * cin + n];
                                    let k = kernel[((c * win + ky) * win + kx) * cout + o];
                                    want += x as f64 * k as f64;
                                }
                            }
                        }
                        let got = one[((oy * out_side + ox) * cin + n) * cout + o] as f64;
                        assert!(
                            (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                            "{got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
