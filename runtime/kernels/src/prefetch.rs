//! Software prefetch of the next piece of a stream while the current one is worked on.
//!
//! The hardware prefetchers follow a sequential stream, but a routine that reads each small
//! chunk many times over, with many FMAs per byte in between, asks for the next chunk's first
//! line only when it starts on it, and then waits on memory. Where the data was just written
//! with streaming stores (the pool gradients, `pooling::STREAM_BYTES`) it is in DRAM, not in
//! any cache. Spreading the next chunk's prefetches over the current chunk's passes hides
//! that latency. On a Zen 5 (family 26) the conv-1 weight gradient reading a 12.8 MB gradient
//! from DRAM went 1.7 -> 0.95 ms on one thread (0.9 -> 0.57 on two), the same as from cache,
//! and the conv-2 Winograd filter gradient in the MNIST step 5.2 -> 4.7 ms on one thread
//! (docs/performance.md, Family 26).

/// Bytes per cache line.
const LINE: usize = 64;

/// Prefetches part `part` of `parts` of `[start, start + bytes)` into L1, stopping at `end`
/// (exclusive): calling it for every `part < parts` covers the range once.
///
/// Prefetching is a hint; it never faults, so the addresses need not be valid, but they are
/// kept within `[start, end)` so that no line past the stream is fetched for nothing.
#[inline]
pub(crate) fn prefetch_part(
    start: *const u8,
    bytes: usize,
    end: *const u8,
    part: usize,
    parts: usize,
) {
    prefetch_lines::<false>(start, bytes, end, part, parts)
}

/// Prefetches all of `[start, start + bytes)` into L1: a block read soon whose address the
/// hardware prefetchers cannot guess (a row an index names, a step of a wide matrix).
#[inline]
pub fn prefetch(start: *const u8, bytes: usize) {
    prefetch_part(start, bytes, start.wrapping_add(bytes), 0, 1)
}

/// As [`prefetch_part`], into L2 only: for a block that is worked on long after it is
/// fetched, beside a working set that fills L1.
#[inline]
pub(crate) fn prefetch_part_l2(
    start: *const u8,
    bytes: usize,
    end: *const u8,
    part: usize,
    parts: usize,
) {
    prefetch_lines::<true>(start, bytes, end, part, parts)
}

#[inline(always)]
fn prefetch_lines<const L2: bool>(
    start: *const u8,
    bytes: usize,
    end: *const u8,
    part: usize,
    parts: usize,
) {
    let in_stream = (end as usize).saturating_sub(start as usize);
    for line in part_lines(bytes.min(in_stream), part, parts) {
        let at = start.wrapping_add(line * LINE);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint and does not fault on any address.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
            if L2 {
                _mm_prefetch::<_MM_HINT_T1>(at as *const i8)
            } else {
                _mm_prefetch::<_MM_HINT_T0>(at as *const i8)
            }
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }
}

/// The cache lines (indices from the start) of part `part` of `parts` of a `bytes`-long
/// range: consecutive, about equal parts that cover `0..bytes.div_ceil(LINE)` once.
fn part_lines(bytes: usize, part: usize, parts: usize) -> std::ops::Range<usize> {
    let lines = bytes.div_ceil(LINE);
    let per = lines.div_ceil(parts.max(1));
    (part * per).min(lines)..((part + 1) * per).min(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts are consecutive and cover every line of the range once, for ranges that are
    /// and are not whole lines and parts that do and do not divide them (more parts than
    /// lines included).
    #[test]
    fn parts_cover_every_line_once() {
        for bytes in [0, 1, 63, 64, 65, 14336, 14337] {
            for parts in [1, 2, 3, 5, 7, 300] {
                let mut next = 0;
                for part in 0..parts {
                    let r = part_lines(bytes, part, parts);
                    assert_eq!(r.start, next, "bytes {bytes} parts {parts} part {part}");
                    assert!(r.start <= r.end);
                    next = r.end;
                }
                assert_eq!(next, bytes.div_ceil(LINE), "bytes {bytes} parts {parts}");
            }
        }
    }

    /// `end` cuts the range short: nothing at or past it is named.
    #[test]
    fn the_end_of_the_stream_cuts_the_range() {
        let start = 4096 as *const u8;
        let end = start.wrapping_add(100);
        let in_stream = (end as usize) - (start as usize);
        assert_eq!(part_lines(4096.min(in_stream), 0, 1), 0..2);
        assert_eq!(part_lines(0, 0, 1), 0..0);
    }
}
