//! Buffers from the shared sets of values, and their offsets in the arena.

use super::builder::Builder;
use super::sharing::Sets;
use super::{align_to, Buffer};
use hashbrown::HashMap;

/// One buffer per set of values that share one, in the order of each set's first value,
/// sized for its largest value; empty buffers dropped. Also returns each value's buffer.
pub(super) fn collect_buffers(b: &Builder, sets: &mut Sets) -> (Vec<Buffer>, Vec<Option<usize>>) {
    let mut index: HashMap<usize, usize> = HashMap::new();
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut buffer_of_value = Vec::with_capacity(b.values.len());
    for v in 0..b.values.len() {
        let r = sets.find(v);
        let bi = *index.entry(r).or_insert_with(|| {
            buffers.push(Buffer {
                size: 0,
                offset: 0,
                live_range: sets.range(r),
                values: Vec::new(),
                kind: b.values[v].kind,
            });
            buffers.len() - 1
        });
        let buf = &mut buffers[bi];
        buf.size = buf.size.max(b.values[v].size);
        buf.values.push(b.values[v].name.clone());
        buffer_of_value.push(bi);
    }
    // Drop empty buffers, keeping the value -> buffer map in step.
    let mut renumber = vec![None; buffers.len()];
    let mut kept = 0;
    for (i, buf) in buffers.iter().enumerate() {
        if buf.size > 0 {
            renumber[i] = Some(kept);
            kept += 1;
        }
    }
    buffers.retain(|buf| buf.size > 0);
    let buffer_of = buffer_of_value.iter().map(|&bi| renumber[bi]).collect();
    (buffers, buffer_of)
}

/// Largest sum of sizes live at one position.
pub(super) fn max_live(items: impl Iterator<Item = ((usize, usize), i64)>, end: usize) -> i64 {
    let mut delta = vec![0i64; end + 3];
    for ((s, e), size) in items {
        delta[s] += size;
        delta[e + 1] -= size;
    }
    let (mut live, mut peak) = (0i64, 0i64);
    for d in delta {
        live += d;
        peak = peak.max(live);
    }
    peak
}

/// Gives every buffer an offset so that buffers live at the same time do not overlap; tries
/// two orders (largest first, earliest first) and keeps the smaller result. Buffers that are
/// not `placed` in the arena get offset -1. Returns the peak.
pub(super) fn place(
    buffers: &mut [Buffer],
    alignment: i64,
    in_arena: impl Fn(&Buffer) -> bool,
) -> i64 {
    let align = |n: i64| align_to(n, alignment);
    let overlaps = |a: (usize, usize), b: (usize, usize)| a.0 <= b.1 && b.0 <= a.1;
    let try_order = |order: &[usize], buffers: &[Buffer]| -> (Vec<i64>, i64) {
        let mut offsets = vec![-1i64; buffers.len()];
        // The buffers placed so far as `(start, end, buffer)`, kept sorted by place: the ones
        // live with the next buffer are then met in address order, with no sort per buffer
        // (ResNet-20's step has about 900 buffers, and sorting each one's neighbours took
        // most of the assignment's time).
        let mut placed: Vec<(i64, i64, usize)> = Vec::new();
        let mut peak = 0;
        for &i in order {
            let size = align(buffers[i].size);
            // Best fit: the smallest gap that holds the buffer, else the top.
            let mut best: Option<(i64, i64)> = None;
            let mut cursor = 0;
            for &(s, e, j) in &placed {
                if !overlaps(buffers[i].live_range, buffers[j].live_range) {
                    continue;
                }
                if s > cursor && s - cursor >= size {
                    let gap = s - cursor;
                    if best.is_none_or(|(g, _)| gap < g) {
                        best = Some((gap, cursor));
                    }
                }
                cursor = cursor.max(e);
            }
            let offset = best.map(|(_, o)| o).unwrap_or(cursor);
            offsets[i] = offset;
            peak = peak.max(offset + size);
            let entry = (offset, offset + size, i);
            let at = placed.partition_point(|&p| p < entry);
            placed.insert(at, entry);
        }
        (offsets, peak)
    };
    let arena: Vec<usize> = (0..buffers.len())
        .filter(|&i| in_arena(&buffers[i]))
        .collect();
    let mut by_size = arena.clone();
    by_size.sort_by_key(|&i| (-buffers[i].size, buffers[i].live_range.0));
    let mut by_start = arena;
    by_start.sort_by_key(|&i| (buffers[i].live_range.0, -buffers[i].size));
    let a = try_order(&by_size, buffers);
    let b = try_order(&by_start, buffers);
    let (offsets, peak) = if b.1 < a.1 { b } else { a };
    for (buf, o) in buffers.iter_mut().zip(offsets) {
        buf.offset = o;
    }
    peak
}
