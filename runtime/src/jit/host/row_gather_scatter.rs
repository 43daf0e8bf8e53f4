//! Gathers and scatter-adds of whole rows: an embedding lookup and its gradient.
//!
//! A "row" gather or scatter indexes only the operand's leading `k` dimensions (in any order
//! of the index vector's components) and takes every other dimension whole, so each index
//! vector names one contiguous run of `row_len` elements. Then a gather is one `memcpy` per
//! index vector and a scatter whose combiner is `add(p0, p1)` on `f32`/`f64` adds each update
//! row into its target row with a loop the compiler vectorizes.
//!
//! Both keep the interpreter's semantics bit for bit (`interpreter/gather_scatter.rs`): a
//! gather clamps each start into `[0, dim - 1]`; a scatter skips an update row whose start is
//! outside `[0, dim - 1]` in any indexed dimension, and adds the rows in row-major order of
//! the updates, so every element sees the same additions in the same order as `ScatterStep`.
//! The routines in `gather_scatter.rs` take these paths when the shapes match
//! ([`row_gather`], [`row_scatter_add`]) and run the general code otherwise.
//!
//! From 256 KB on, both share their work between the program's threads: a gather by ranges of
//! the rows it writes, a scatter by ranges of the operand's rows, each thread copying its range
//! from the operand (unless the result is written over it) and adding the updates that fall
//! in it in the order of the index vectors (so the bits do not depend on the thread count).
//! The vectors are grouped by range in one pass first, so a thread reads only its ranges'
//! vectors. Both prefetch the rows a few vectors ahead: an embedding's rows are scattered over
//! megabytes, and each is a miss the hardware prefetchers cannot predict.

use tessel_compiler::ir::{
    ArrayShape, BinaryOp, ComputationId, ElementType, GatherDimensionNumbers, Module, Op,
    ScatterDimensionNumbers,
};
use tessel_kernels::parallel::{chunk_len, for_each_range, Shared};
use tessel_kernels::prefetch::prefetch;

/// How the index vectors of a row gather or scatter pick rows of the operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowIndexing {
    /// For each component of an index vector: the size of the operand dimension it starts
    /// and that dimension's stride counted in rows.
    components: Vec<(i64, usize)>,
    /// How many index vectors there are (rows gathered or scattered).
    count: usize,
    /// Elements in one row.
    row_len: usize,
    index_type: ElementType,
}

impl RowIndexing {
    /// Elements in one row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// Rows gathered or scattered (one per index vector).
    pub fn count(&self) -> usize {
        self.count
    }

    /// The geometry shared by both forms: the indices hold `count` index vectors of
    /// `start_map.len()` components contiguously (the index vector dimension is the last or
    /// implicit), the components start the operand's leading dimensions, and `row_dims`
    /// (the operand's other dimensions) are taken whole.
    fn new(
        operand: &ArrayShape,
        indices: &ArrayShape,
        index_vector_dim: i64,
        start_map: &[i64],
    ) -> Option<RowIndexing> {
        let k = start_map.len();
        let rank = operand.rank();
        let idx_rank = indices.rank();
        let index_type = indices.element_type;
        let integer = matches!(
            index_type,
            ElementType::S8
                | ElementType::U8
                | ElementType::S16
                | ElementType::U16
                | ElementType::S32
                | ElementType::U32
                | ElementType::S64
                | ElementType::U64
        );
        if !integer || k == 0 || k > rank {
            return None;
        }
        let ivd = usize::try_from(index_vector_dim).ok()?;
        let batch_dims = if ivd == idx_rank && k == 1 {
            &indices.dims[..]
        } else if ivd + 1 == idx_rank && indices.dims[ivd] == k as i64 {
            &indices.dims[..ivd]
        } else {
            return None;
        };
        let mut sorted = start_map.to_vec();
        sorted.sort_unstable();
        if sorted.iter().enumerate().any(|(i, &d)| d != i as i64) {
            return None;
        }
        let dims = &operand.dims;
        if dims.iter().any(|&d| d < 0) || batch_dims.iter().any(|&d| d < 0) {
            return None;
        }
        // Row strides of the indexed dimensions: the product of the indexed sizes after each.
        let mut row_stride = vec![1usize; k];
        for d in (0..k.saturating_sub(1)).rev() {
            row_stride[d] = row_stride[d + 1] * dims[d + 1] as usize;
        }
        Some(RowIndexing {
            components: start_map
                .iter()
                .map(|&d| (dims[d as usize], row_stride[d as usize]))
                .collect(),
            count: batch_dims.iter().product::<i64>() as usize,
            row_len: dims[k..].iter().product::<i64>() as usize,
            index_type,
        })
    }

    /// The row index vector `i` names, each start clamped into its dimension (a gather).
    ///
    /// # Safety
    /// `indices` must hold `count * components` elements of the index type.
    unsafe fn clamped_row(&self, indices: *const u8, i: usize) -> usize {
        let k = self.components.len();
        let mut row = 0usize;
        for (j, &(size, stride)) in self.components.iter().enumerate() {
            let v = unsafe { read_index(self.index_type, indices, i * k + j) };
            row += v.clamp(0, size - 1) as usize * stride;
        }
        row
    }

    /// The row index vector `i` names, or `None` when a start falls outside its dimension
    /// (a scatter skips that row).
    ///
    /// # Safety
    /// `indices` must hold `count * components` elements of the index type.
    unsafe fn row_inside(&self, indices: *const u8, i: usize) -> Option<usize> {
        let k = self.components.len();
        let mut row = 0usize;
        for (j, &(size, stride)) in self.components.iter().enumerate() {
            let v = unsafe { read_index(self.index_type, indices, i * k + j) };
            if !(0..size).contains(&v) {
                return None;
            }
            row += v as usize * stride;
        }
        Some(row)
    }
}

/// Element `i` of an integer array as a signed number; an unsigned value too large for i64
/// is past every bound (as the interpreter reads indices).
///
/// # Safety
/// `p` must hold at least `i + 1` elements of type `t`.
unsafe fn read_index(t: ElementType, p: *const u8, i: usize) -> i64 {
    unsafe {
        match t {
            ElementType::S8 => (p as *const i8).add(i).read_unaligned() as i64,
            ElementType::U8 => p.add(i).read_unaligned() as i64,
            ElementType::S16 => (p as *const i16).add(i).read_unaligned() as i64,
            ElementType::U16 => (p as *const u16).add(i).read_unaligned() as i64,
            ElementType::S32 => (p as *const i32).add(i).read_unaligned() as i64,
            ElementType::U32 => (p as *const u32).add(i).read_unaligned() as i64,
            ElementType::S64 => (p as *const i64).add(i).read_unaligned(),
            _ => i64::try_from((p as *const u64).add(i).read_unaligned()).unwrap_or(i64::MAX),
        }
    }
}

/// The row geometry of a gather, when it takes whole rows: no batching dimensions, every
/// indexed dimension sliced at size 1 (collapsed or kept), every other dimension whole, and
/// the offset dimensions the result's trailing ones.
pub fn row_gather(
    dims: &GatherDimensionNumbers,
    slice_sizes: &[i64],
    operand: &ArrayShape,
    indices: &ArrayShape,
    result: &ArrayShape,
) -> Option<RowIndexing> {
    if !dims.operand_batching_dims.is_empty() || !dims.start_indices_batching_dims.is_empty() {
        return None;
    }
    let rows = RowIndexing::new(
        operand,
        indices,
        dims.index_vector_dim,
        &dims.start_index_map,
    )?;
    let k = rows.components.len();
    let rank = operand.rank();
    let whole_rows = slice_sizes.len() == rank
        && (0..rank).all(|d| slice_sizes[d] == if d < k { 1 } else { operand.dims[d] });
    if !whole_rows
        || dims
            .collapsed_slice_dims
            .iter()
            .any(|&d| d < 0 || d >= k as i64)
    {
        return None;
    }
    // Clamping into [0, size - 1] needs a row to exist in every indexed dimension.
    if rows.components.iter().any(|&(size, _)| size < 1) {
        return None;
    }
    let offsets = rank - dims.collapsed_slice_dims.len();
    let batch_rank = result.rank().checked_sub(offsets)?;
    let trailing = dims.offset_dims.len() == offsets
        && dims
            .offset_dims
            .iter()
            .enumerate()
            .all(|(i, &d)| d == (batch_rank + i) as i64);
    let sized = result.element_count() as usize == rows.count * rows.row_len
        && result.element_type == operand.element_type;
    (trailing && sized).then_some(rows)
}

/// The row geometry of a scatter, when it adds whole rows: its combiner is `add` of its
/// two scalar parameters on `f32` or `f64`, it has no batching dimensions, each update
/// window is one whole row (size 1 in every indexed dimension, the full size in the others)
/// and the window dimensions are the updates' trailing ones. The flag says the combiner is
/// `add(p1, p0)`.
pub fn row_scatter_add(
    module: &Module,
    dims: &ScatterDimensionNumbers,
    to_apply: ComputationId,
    operand: &ArrayShape,
    indices: &ArrayShape,
    updates: &ArrayShape,
) -> Option<(RowIndexing, bool)> {
    let t = operand.element_type;
    if !matches!(t, ElementType::F32 | ElementType::F64) || updates.element_type != t {
        return None;
    }
    let swapped = add_combiner(module, to_apply, t)?;
    if !dims.input_batching_dims.is_empty() || !dims.scatter_indices_batching_dims.is_empty() {
        return None;
    }
    let rows = RowIndexing::new(
        operand,
        indices,
        dims.index_vector_dim,
        &dims.scatter_dims_to_operand_dims,
    )?;
    let k = rows.components.len();
    if dims
        .inserted_window_dims
        .iter()
        .any(|&d| d < 0 || d >= k as i64)
    {
        return None;
    }
    let window: Vec<usize> = (0..operand.rank())
        .filter(|&d| !dims.inserted_window_dims.contains(&(d as i64)))
        .collect();
    let batch_rank = updates.rank().checked_sub(window.len())?;
    let whole_rows = dims.update_window_dims.len() == window.len()
        && window.iter().enumerate().all(|(i, &od)| {
            let extent = if od < k { 1 } else { operand.dims[od] };
            dims.update_window_dims[i] == (batch_rank + i) as i64
                && updates.dims[batch_rank + i] == extent
        });
    let sized = updates.element_count() as usize == rows.count * rows.row_len;
    (whole_rows && sized).then_some((rows, swapped))
}

/// Whether computation `c` is `add` of its two scalar parameters of type `t`: `Some(false)`
/// for `add(p0, p1)`, `Some(true)` for `add(p1, p0)`.
fn add_combiner(module: &Module, c: ComputationId, t: ElementType) -> Option<bool> {
    let comp = module.computations.get(c.0 as usize)?;
    if !comp.has_root() || comp.parameters().len() != 2 {
        return None;
    }
    let root = comp.get(comp.root());
    if !matches!(root.op, Op::Binary(BinaryOp::Add)) || root.operands().len() != 2 {
        return None;
    }
    let param = |i: usize| {
        let p = comp.get(root.operands()[i]);
        let scalar = p
            .shape
            .as_array()
            .is_some_and(|a| a.rank() == 0 && a.element_type == t);
        match p.op {
            Op::Parameter(n) if scalar => Some(n),
            _ => None,
        }
    };
    match (param(0)?, param(1)?) {
        (0, 1) => Some(false),
        (1, 0) => Some(true),
        _ => None,
    }
}

/// Copies row `rows.clamped_row(i)` of `src` to row `i` of `dst`, for every index vector, on
/// up to `threads` threads (each copies a range of the index vectors).
///
/// # Safety
/// `src` holds the operand, `indices` the index vectors, `dst` `count` rows of
/// `row_bytes`; `dst` overlaps neither.
pub(crate) unsafe fn gather_rows(
    rows: &RowIndexing,
    src: *const u8,
    indices: *const u8,
    dst: *mut u8,
    row_bytes: usize,
    threads: usize,
) {
    let (src, indices, dst) = (
        Shared(src.cast_mut()),
        Shared(indices.cast_mut()),
        Shared(dst),
    );
    let threads = threads_for(rows.count * row_bytes, threads);
    let chunk = chunk_len(rows.count, threads, 1);
    for_each_range(rows.count, chunk, threads, |lo, hi| {
        for i in lo..hi {
            if i + AHEAD < hi {
                let ahead = unsafe { rows.clamped_row(indices.get(), i + AHEAD) };
                prefetch(src.get().wrapping_add(ahead * row_bytes), row_bytes);
            }
            let r = unsafe { rows.clamped_row(indices.get(), i) };
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.get().add(r * row_bytes),
                    dst.get().add(i * row_bytes),
                    row_bytes,
                )
            };
        }
    });
}

/// Fewest bytes a row routine moves before it uses more than one thread.
const PARALLEL_BYTES: usize = 1 << 18;

/// Index vectors ahead of the one being worked on whose rows are prefetched. The rows an
/// embedding's ids name are scattered over tens of megabytes, so each is a cache miss the
/// hardware prefetchers cannot predict; asking for the rows a few vectors ahead overlaps
/// those misses with the copies and adds of the rows before them.
const AHEAD: usize = 8;

/// The threads for a row routine moving `bytes`: one when that is too little to share.
fn threads_for(bytes: usize, threads: usize) -> usize {
    if bytes < PARALLEL_BYTES {
        1
    } else {
        threads.max(1)
    }
}

/// Writes `out`, `out_rows` rows of `row_len` elements: the operand's rows (`operand`, or
/// what `out` already holds when it is `None`) plus every update row added into its row
/// `rows.row_inside(i)` in the order of the index vectors, skipping rows outside the operand.
/// Up to `threads` threads each take a range of `out`'s rows, copy it and add the updates
/// that fall in it, in order: every element sees the same additions in the same order
/// whatever the thread count.
///
/// # Safety
/// `indices` must hold the `count` index vectors, `updates` `count` rows, `out` and `operand`
/// `out_rows` rows each; `operand` and `out` are the same memory or do not overlap, and
/// neither overlaps `indices` or `updates`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn scatter_add_rows<T: Copy + Sync + std::ops::Add<Output = T>>(
    rows: &RowIndexing,
    indices: *const u8,
    updates: &[T],
    operand: Option<*const T>,
    out: *mut T,
    out_rows: usize,
    swapped: bool,
    threads: usize,
) {
    if rows.row_len == 0 {
        return;
    }
    let n = rows.row_len;
    let (indices, out) = (Shared(indices.cast_mut()), Shared(out));
    let operand = operand.map(|p| Shared(p.cast_mut()));
    let threads = threads_for(out_rows * n * std::mem::size_of::<T>(), threads);
    let row_bytes = n * std::mem::size_of::<T>();
    let prefetch_row = |p: *const T| prefetch(p as *const u8, row_bytes);
    // Adds update row i into row r, prefetching the rows of the vector AHEAD places on.
    let add = |i: usize, r: usize, ahead: Option<(usize, usize)>| {
        if let Some((a, row)) = ahead {
            prefetch_row(out.get().wrapping_add(row * n));
            prefetch_row(updates.as_ptr().wrapping_add(a * n));
        }
        let u = &updates[i * n..(i + 1) * n];
        let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(r * n), n) };
        if swapped {
            o.iter_mut().zip(u).for_each(|(o, &u)| *o = u + *o);
        } else {
            o.iter_mut().zip(u).for_each(|(o, &u)| *o = *o + u);
        }
    };
    let copy_operand = |lo: usize, hi: usize| {
        if let Some(src) = operand {
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.get().add(lo * n),
                    out.get().add(lo * n),
                    (hi - lo) * n,
                )
            };
        }
    };
    if threads == 1 {
        copy_operand(0, out_rows);
        let inside = |i: usize| unsafe { rows.row_inside(indices.get(), i) }.map(|r| (i, r));
        for (i, r) in (0..rows.count).filter_map(inside) {
            let ahead = (i + AHEAD < rows.count).then(|| inside(i + AHEAD));
            add(i, r, ahead.flatten());
        }
        return;
    }
    let chunk = chunk_len(out_rows, threads, 1);
    let (order, starts) = unsafe { vectors_by_range(rows, indices.get(), out_rows, chunk) };
    for_each_range(out_rows, chunk, threads, |lo, hi| {
        copy_operand(lo, hi);
        let mine = &order[starts[lo / chunk]..starts[lo / chunk + 1]];
        for (j, &(i, r)) in mine.iter().enumerate() {
            add(i, r, mine.get(j + AHEAD).copied());
        }
    });
}

/// The index vectors whose rows fall inside the operand, as `(vector, row)`, grouped by the
/// range of `chunk` rows their row is in and in vector order within each group, and where
/// each group starts (`starts[c]..starts[c + 1]` for range `c`). Each thread then reads only
/// its ranges' vectors instead of every vector once per range.
///
/// # Safety
/// `indices` must hold the `count` index vectors.
unsafe fn vectors_by_range(
    rows: &RowIndexing,
    indices: *const u8,
    out_rows: usize,
    chunk: usize,
) -> (Vec<(usize, usize)>, Vec<usize>) {
    let ranges = out_rows.div_ceil(chunk.max(1));
    let inside = |i: usize| unsafe { rows.row_inside(indices, i) };
    let mut starts = vec![0usize; ranges + 1];
    for r in (0..rows.count).filter_map(inside) {
        starts[r / chunk + 1] += 1;
    }
    for c in 0..ranges {
        starts[c + 1] += starts[c];
    }
    let mut fill = starts.clone();
    let mut order = vec![(0, 0); starts[ranges]];
    for (i, r) in (0..rows.count).filter_map(|i| Some((i, inside(i)?))) {
        let slot = &mut fill[r / chunk];
        order[*slot] = (i, r);
        *slot += 1;
    }
    (order, starts)
}
