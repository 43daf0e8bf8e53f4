//! What the routines' unit tests share: deterministic operands and aligned scratch.

/// `n` deterministic values (an xorshift sequence from `seed`) in `[-bound, bound)`, in steps
/// of `bound / 1000`.
pub(crate) fn values_within(n: usize, seed: u32, bound: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / (1000.0 / bound) - bound
        })
        .collect()
}

/// [`values_within`] `[-2, 2)`.
pub(crate) fn values(n: usize, seed: u32) -> Vec<f32> {
    values_within(n, seed, 2.0)
}

/// A scratch block of `bytes`, 64-byte aligned.
pub(crate) fn scratch_block(bytes: usize) -> Vec<[u64; 8]> {
    vec![[0; 8]; bytes.div_ceil(64) + 1]
}
