//! tessel's own packed f32 product for machines with AVX2 and FMA but no AVX-512. On one
//! thread the `gemm` crate's AVX2 kernel is as fast at its best; on two, the crate packs the
//! operand every part reads once per part, and a transposed `b` went through a band
//! transposition first (docs/performance.md, "tessel's packed AVX2 product").
//!
//! The classic blocked scheme: `k` is cut into blocks of at most [`KC`] steps; within one,
//! rows of `a` are packed into panels of [`MR`] and columns of `b` into panels of [`NR`], each
//! laid out step by step so that the micro-kernel (`avx2.rs`, a 6 x 16 block of `c` in
//! registers) reads both sequentially (`pack.rs` packs them). Rows of `a` are taken [`MC`]
//! at a time, so that their panels stay in L2 while one `b` panel, in L1, meets each of them
//! in turn.
//!
//! **Threads.** The product is cut along the longer of `c`'s dimensions into parts claimed as
//! threads become free (`super::split_product`). The other operand, which every part reads
//! whole, is packed once, before the parts, into the caller's buffer; each part packs its
//! own slice of the cut operand into its thread's buffers.
//!
//! **Bits.** Every element of `c` is one fused multiply-add chain over `k` in order, from zero
//! or (accumulating) from `c`: a block of `k` after the first starts from what the block
//! before it stored. So the result does not depend on the blocking, on the cut, or on the
//! number of threads.
//!
//! Declines ([`serves`] is false) without AVX2 and FMA, or with AVX-512 (the `gemm` crate's
//! AVX-512 kernels reach 86-93% of the peak), for products too small to split, narrower than
//! [`MIN_SIDE`] or deeper than [`MAX_DEPTH`] (where the crate was measured faster), and when
//! the whole-packed operand would exceed [`MAX_SHARED`].

use std::cell::RefCell;
use std::sync::OnceLock;

use super::{split_product, PARALLEL_PRODUCT};
use crate::cpu::Isa;
use crate::parallel::{for_each_range, Shared};

mod avx2;
mod pack;

use pack::pack;

/// Rows of `c` in the micro-kernel's register block.
pub(crate) const MR: usize = 6;
/// Columns of `c` in the micro-kernel's register block (two 8-lane vectors).
pub(crate) const NR: usize = 16;
/// Steps of `k` in one block at most: a `b` panel of `KC x NR` floats (16 KiB) fits in L1.
const KC: usize = 256;
/// Rows of `a` packed together: `MC x KC` floats (144 KiB) stay in L2 while `b`'s panels
/// pass.
const MC: usize = 144;
/// Columns of `b` a part packs together: `KC x NC` floats (256 KiB) in L2.
const NC: usize = 256;
/// Rows and columns of `c` the packed product needs at least: narrower products (a
/// convolution's few output channels) do better in the `gemm` crate.
const MIN_SIDE: usize = 128;
/// Steps of `k` the packed product takes at most: deeper ones reload `c` for every block of
/// [`KC`] steps, and did better in the `gemm` crate (the MNIST CNN's 3136-deep dense layer).
const MAX_DEPTH: usize = 1024;
/// Floats the whole-packed operand may take (8 MiB); larger products use the `gemm` crate.
const MAX_SHARED: usize = 1 << 21;

/// Whether the packed product computes this `m x n x k` product on this machine: where it was
/// measured to beat the `gemm` crate, products at least [`MIN_SIDE`] wide in `m` and `n` and at
/// most [`MAX_DEPTH`] deep (dense layers, and the larger per-tile products of the
/// convolutions), split or not.
pub(crate) fn serves(m: usize, n: usize, k: usize) -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    let enabled = *ENABLED.get_or_init(|| {
        Isa::detect() == Isa::Avx2Fma && std::env::var("TESSEL_PACKED_GEMM").as_deref() != Ok("0")
    });
    let shared = if n >= m {
        m.next_multiple_of(MR)
    } else {
        n.next_multiple_of(NR)
    };
    enabled
        && m.min(n) >= MIN_SIDE
        && k <= MAX_DEPTH
        && m * n * k >= PARALLEL_PRODUCT
        && shared * k <= MAX_SHARED
}

/// How `k` is cut: `(blocks, steps per block)`, the last block maybe shorter. Blocks are
/// about equal, so no block is a few steps long.
fn depth_blocks(k: usize) -> (usize, usize) {
    let blocks = k.div_ceil(KC);
    (blocks, k.div_ceil(blocks))
}

thread_local! {
    /// The caller's buffer for the operand every part reads whole.
    static SHARED_PANELS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// Each thread's buffers for its part's slices of `a` and `b`.
    static PART_PANELS: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// A matrix operand: element `(r, p)` at `ptr[r * rs + p * ds]`, `r` along `c`'s rows for `a`
/// and columns for `b`.
#[derive(Clone, Copy)]
struct Operand {
    ptr: Shared<f32>,
    rs: isize,
    ds: isize,
}

/// Where a part finds an operand's panels for one block of `k`: packed whole beforehand
/// (block `p0` of a `padded`-row operand at `p0 * padded`), or to be packed by the part.
#[derive(Clone, Copy)]
enum Panels {
    Whole { packed: Shared<f32>, padded: usize },
    Own(Operand),
}

/// `c = a * b` (or `c += a * b`) on up to `threads` threads. See the module's comment.
///
/// # Safety
/// As [`super::sgemm`], with `m`, `n` and `k` above zero; the CPU must have AVX2 and FMA (as
/// [`serves`] checks).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    threads: usize,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    accumulate: bool,
) {
    let a = Operand {
        ptr: Shared(a as *mut f32),
        rs: rsa,
        ds: csa,
    };
    let b = Operand {
        ptr: Shared(b as *mut f32),
        rs: csb,
        ds: rsb,
    };
    let threads = threads.max(1);
    // The longer dimension is cut (as `split_product` does); the other operand is shared.
    let cut_columns = n >= m;
    SHARED_PANELS.with_borrow_mut(|buffer| {
        let padded = if cut_columns {
            m.next_multiple_of(MR)
        } else {
            n.next_multiple_of(NR)
        };
        if buffer.len() < padded * k {
            buffer.resize(padded * k, 0.0);
        }
        let packed = Shared(buffer.as_mut_ptr());
        if cut_columns {
            pack_whole::<MR>(threads, a, m, k, packed);
        } else {
            pack_whole::<NR>(threads, b, n, k, packed);
        }
        let whole = Panels::Whole { packed, padded };
        let (a_panels, b_panels) = if cut_columns {
            (whole, Panels::Own(b))
        } else {
            (Panels::Own(a), whole)
        };
        let c = Shared(c);
        split_product(threads, m, n, k, &|m0, m1, n0, n1| {
            part(
                [m0, m1, n0, n1],
                k,
                a_panels,
                b_panels,
                c.get(),
                rsc,
                csc,
                accumulate,
            )
        });
    });
}

/// Packs all of an operand (`rows` rows, `W`-row panels) block of `k` by block into
/// `packed`, its panels shared among `threads`.
unsafe fn pack_whole<const W: usize>(
    threads: usize,
    op: Operand,
    rows: usize,
    k: usize,
    packed: Shared<f32>,
) {
    let padded = rows.next_multiple_of(W);
    let (blocks, step) = depth_blocks(k);
    let panels = padded / W;
    let chunk = crate::parallel::chunk_len(panels, threads, 1);
    for_each_range(panels, chunk, threads, |q0, q1| {
        let r0 = q0 * W;
        let live = (q1 * W).min(rows) - r0;
        for block in 0..blocks {
            let (p0, kc) = (block * step, step.min(k - block * step));
            let src = op
                .ptr
                .get()
                .offset(r0 as isize * op.rs + p0 as isize * op.ds);
            let dst = packed.get().add(p0 * padded + q0 * W * kc);
            pack::<W>(live, kc, src, op.rs, op.ds, dst);
        }
    });
}

/// Rows `m0..m1` and columns `n0..n1` of `c` over all of `k`, on this thread.
#[allow(clippy::too_many_arguments)]
unsafe fn part(
    [m0, m1, n0, n1]: [usize; 4],
    k: usize,
    a: Panels,
    b: Panels,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    accumulate: bool,
) {
    let (blocks, step) = depth_blocks(k);
    PART_PANELS.with_borrow_mut(|(a_buffer, b_buffer)| {
        if a_buffer.len() < MC * step {
            a_buffer.resize(MC * step, 0.0);
        }
        if b_buffer.len() < NC * step {
            b_buffer.resize(NC * step, 0.0);
        }
        for block in 0..blocks {
            let (p0, kc) = (block * step, step.min(k - block * step));
            let from_c = accumulate || block > 0;
            // Columns in chunks that the part packs itself (all at once when `b` is whole).
            let column_chunk = match b {
                Panels::Whole { .. } => n1 - n0,
                Panels::Own(_) => NC,
            };
            for j0 in (n0..n1).step_by(column_chunk) {
                let j1 = (j0 + column_chunk).min(n1);
                let b_panels = panels_of::<NR>(b, j0, j1, p0, kc, b_buffer.as_mut_ptr());
                for i0 in (m0..m1).step_by(MC) {
                    let i1 = (i0 + MC).min(m1);
                    let a_panels = panels_of::<MR>(a, i0, i1, p0, kc, a_buffer.as_mut_ptr());
                    let at = c.offset(i0 as isize * rsc + j0 as isize * csc);
                    tiles(
                        [i1 - i0, j1 - j0],
                        kc,
                        a_panels,
                        b_panels,
                        at,
                        rsc,
                        csc,
                        from_c,
                    );
                }
            }
        }
    });
}

/// The panels of rows `r0..r1` of an operand for the block of `k` at `p0`: in the whole-packed
/// buffer (`r0` a multiple of `W` there), or packed now into `buffer`.
unsafe fn panels_of<const W: usize>(
    op: Panels,
    r0: usize,
    r1: usize,
    p0: usize,
    kc: usize,
    buffer: *mut f32,
) -> *const f32 {
    match op {
        Panels::Whole { packed, padded } => {
            debug_assert!(r0.is_multiple_of(W));
            packed.get().add(p0 * padded + r0 * kc)
        }
        Panels::Own(o) => {
            let src = o.ptr.get().offset(r0 as isize * o.rs + p0 as isize * o.ds);
            pack::<W>(r1 - r0, kc, src, o.rs, o.ds, buffer);
            buffer
        }
    }
}

/// The `rows x cols` block of `c` at `c` over one block of `kc` steps: each `b` panel meets
/// every `a` panel in turn. Blocks that are cut by the edge of `c`, or whose columns are not
/// adjacent, go through a buffer of one register block.
#[allow(clippy::too_many_arguments)]
unsafe fn tiles(
    [rows, cols]: [usize; 2],
    kc: usize,
    a_panels: *const f32,
    b_panels: *const f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    from_c: bool,
) {
    let mut edge = [0f32; MR * NR];
    for jr in 0..cols.div_ceil(NR) {
        let b_panel = b_panels.add(jr * kc * NR);
        let live_cols = (cols - jr * NR).min(NR);
        for ir in 0..rows.div_ceil(MR) {
            let a_panel = a_panels.add(ir * kc * MR);
            let live_rows = (rows - ir * MR).min(MR);
            let at = c.offset((ir * MR) as isize * rsc + (jr * NR) as isize * csc);
            if csc == 1 && rsc > 0 && live_rows == MR && live_cols == NR {
                if from_c && ir + 1 < rows.div_ceil(MR) {
                    avx2::prefetch_tile(at.offset(MR as isize * rsc), rsc as usize);
                }
                avx2::tile(kc, a_panel, b_panel, at, rsc as usize, from_c);
                continue;
            }
            let cell = |i: usize, j: usize| at.offset(i as isize * rsc + j as isize * csc);
            if from_c {
                for i in 0..live_rows {
                    for j in 0..live_cols {
                        edge[i * NR + j] = *cell(i, j);
                    }
                }
            }
            avx2::tile(kc, a_panel, b_panel, edge.as_mut_ptr(), NR, from_c);
            for i in 0..live_rows {
                for j in 0..live_cols {
                    *cell(i, j) = edge[i * NR + j];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
