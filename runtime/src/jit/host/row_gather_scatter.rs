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

use tessel_compiler::ir::{
    ArrayShape, BinaryOp, ComputationId, ElementType, GatherDimensionNumbers, Module, Op,
    ScatterDimensionNumbers,
};

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

/// Copies row `rows.clamped_row(i)` of `src` to row `i` of `dst`, for every index vector.
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
) {
    for i in 0..rows.count {
        let r = unsafe { rows.clamped_row(indices, i) };
        unsafe {
            std::ptr::copy_nonoverlapping(src.add(r * row_bytes), dst.add(i * row_bytes), row_bytes)
        };
    }
}

/// Adds update row `i` into row `rows.row_inside(i)` of `out` for every index vector in order,
/// skipping rows outside the operand. `out` already holds the operand.
///
/// # Safety
/// `indices` must hold the `count` index vectors.
pub(crate) unsafe fn scatter_add_rows<T: Copy + std::ops::Add<Output = T>>(
    rows: &RowIndexing,
    indices: *const u8,
    updates: &[T],
    out: &mut [T],
    swapped: bool,
) {
    let n = rows.row_len;
    for (i, u) in updates.chunks_exact(n.max(1)).enumerate().take(rows.count) {
        let Some(r) = (unsafe { rows.row_inside(indices, i) }) else {
            continue;
        };
        let o = &mut out[r * n..(r + 1) * n];
        if swapped {
            o.iter_mut().zip(u).for_each(|(o, &u)| *o = u + *o);
        } else {
            o.iter_mut().zip(u).for_each(|(o, &u)| *o = *o + u);
        }
    }
}
