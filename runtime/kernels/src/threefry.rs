//! The 20 rounds of Threefry-2x32 (Salmon et al., "Parallel random numbers: as easy as 1,
//! 2, 3", SC 2011) over arrays of counters: what a dropout mask or a random initializer
//! spends its time on.
//!
//! The compiler finds the rounds in a program (tessel's `random_bits` and JAX's PRNG trace them
//! as adds, shifts, ors and xors) and hands them here with their twelve added words: two
//! before the first round and two after every fourth. The key schedule is whatever computed
//! those words, so the routine is exact for any key. Generated code can only use 4-lane
//! vectors and has no vector rotate; here AVX-512 runs 16 lanes with a one-instruction rotate
//! (`vprolvd`), and AVX2 8 lanes. Every path computes the same bits.

use crate::cpu::CpuFeatures;
use crate::parallel::{chunk_len, for_each_range, Shared};

/// Threefry-2x32's rotation amounts: rounds `4k+1..4k+4` use row `k % 2`.
pub const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

/// Elements below which the routine runs on one thread.
const PARALLEL_ELEMENTS: usize = 1 << 14;

/// One input word of every element: the same value for all, or one per element.
#[derive(Clone, Copy, Debug)]
pub enum Words {
    Splat(u32),
    Array(*const u32),
}

// SAFETY: the routine only reads through an array's pointer.
unsafe impl Send for Words {}
unsafe impl Sync for Words {}

impl Words {
    /// # Safety
    /// An array must hold at least `i + 1` words.
    #[inline(always)]
    unsafe fn at(self, i: usize) -> u32 {
        match self {
            Words::Splat(w) => w,
            Words::Array(p) => *p.add(i),
        }
    }
}

/// For every element `i < len`: `x0 = c0[i] + added[0]`, `x1 = c1[i] + added[1]`, then five
/// times four rounds (`x0 += x1; x1 = rotl(x1, r) ^ x0`, amounts [`ROTATIONS`]) each followed
/// by `x0 += added[2 + 2k]`, `x1 += added[3 + 2k]`; `out0[i] = x0`, `out1[i] = x1`. All
/// arithmetic wraps. Splits over `threads` from [`PARALLEL_ELEMENTS`] elements.
///
/// # Safety
/// Arrays in `c0` and `c1` hold `len` words; `out0` and `out1` have room for `len` words and
/// overlap neither each other nor an input other than at the same element.
pub unsafe fn threefry_rounds(
    c0: Words,
    c1: Words,
    added: &[u32; 12],
    out0: *mut u32,
    out1: *mut u32,
    len: usize,
    threads: usize,
) {
    let (o0, o1) = (Shared(out0), Shared(out1));
    let part =
        |lo: usize, hi: usize| unsafe { rounds_part(c0, c1, added, o0.get(), o1.get(), lo, hi) };
    if threads > 1 && len >= PARALLEL_ELEMENTS {
        for_each_range(len, chunk_len(len, threads, 16), threads, part);
    } else {
        part(0, len);
    }
}

/// [`threefry_rounds`] for the elements `lo..hi`, with the widest vectors this CPU has.
unsafe fn rounds_part(
    c0: Words,
    c1: Words,
    added: &[u32; 12],
    out0: *mut u32,
    out1: *mut u32,
    lo: usize,
    hi: usize,
) {
    let cpu = CpuFeatures::detect();
    let mut i = lo;
    #[cfg(target_arch = "x86_64")]
    {
        if cpu.avx512f {
            i = x86::rounds_avx512(c0, c1, added, out0, out1, i, hi);
        } else if cpu.avx2 {
            i = x86::rounds_avx2(c0, c1, added, out0, out1, i, hi);
        }
    }
    let _ = cpu;
    for j in i..hi {
        let [x0, x1] = rounds_scalar(c0.at(j), c1.at(j), added);
        *out0.add(j) = x0;
        *out1.add(j) = x1;
    }
}

/// The rounds on one pair of words.
pub fn rounds_scalar(c0: u32, c1: u32, added: &[u32; 12]) -> [u32; 2] {
    let mut x0 = c0.wrapping_add(added[0]);
    let mut x1 = c1.wrapping_add(added[1]);
    for k in 0..5 {
        for &r in &ROTATIONS[k % 2] {
            x0 = x0.wrapping_add(x1);
            x1 = x1.rotate_left(r) ^ x0;
        }
        x0 = x0.wrapping_add(added[2 + 2 * k]);
        x1 = x1.wrapping_add(added[3 + 2 * k]);
    }
    [x0, x1]
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Words, ROTATIONS};
    use std::arch::x86_64::*;

    /// 16 elements at a time from `i` while 16 remain before `hi`; returns where it stopped.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rounds_avx512(
        c0: Words,
        c1: Words,
        added: &[u32; 12],
        out0: *mut u32,
        out1: *mut u32,
        mut i: usize,
        hi: usize,
    ) -> usize {
        let load = |w: Words, i: usize| match w {
            Words::Splat(v) => _mm512_set1_epi32(v as i32),
            Words::Array(p) => _mm512_loadu_si512(p.add(i) as *const __m512i),
        };
        let add: [__m512i; 12] = added.map(|a| _mm512_set1_epi32(a as i32));
        let rot: [[__m512i; 4]; 2] = ROTATIONS.map(|row| row.map(|r| _mm512_set1_epi32(r as i32)));
        while i + 16 <= hi {
            let mut x0 = _mm512_add_epi32(load(c0, i), add[0]);
            let mut x1 = _mm512_add_epi32(load(c1, i), add[1]);
            for k in 0..5 {
                for r in rot[k % 2] {
                    x0 = _mm512_add_epi32(x0, x1);
                    x1 = _mm512_xor_si512(_mm512_rolv_epi32(x1, r), x0);
                }
                x0 = _mm512_add_epi32(x0, add[2 + 2 * k]);
                x1 = _mm512_add_epi32(x1, add[3 + 2 * k]);
            }
            _mm512_storeu_si512(out0.add(i) as *mut __m512i, x0);
            _mm512_storeu_si512(out1.add(i) as *mut __m512i, x1);
            i += 16;
        }
        i
    }

    /// 8 elements at a time (rotations as two variable shifts and an or).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn rounds_avx2(
        c0: Words,
        c1: Words,
        added: &[u32; 12],
        out0: *mut u32,
        out1: *mut u32,
        mut i: usize,
        hi: usize,
    ) -> usize {
        let load = |w: Words, i: usize| match w {
            Words::Splat(v) => _mm256_set1_epi32(v as i32),
            Words::Array(p) => _mm256_loadu_si256(p.add(i) as *const __m256i),
        };
        let add: [__m256i; 12] = added.map(|a| _mm256_set1_epi32(a as i32));
        let left: [[__m256i; 4]; 2] = ROTATIONS.map(|row| row.map(|r| _mm256_set1_epi32(r as i32)));
        let right: [[__m256i; 4]; 2] =
            ROTATIONS.map(|row| row.map(|r| _mm256_set1_epi32(32 - r as i32)));
        while i + 8 <= hi {
            let mut x0 = _mm256_add_epi32(load(c0, i), add[0]);
            let mut x1 = _mm256_add_epi32(load(c1, i), add[1]);
            for k in 0..5 {
                for j in 0..4 {
                    x0 = _mm256_add_epi32(x0, x1);
                    let rotated = _mm256_or_si256(
                        _mm256_sllv_epi32(x1, left[k % 2][j]),
                        _mm256_srlv_epi32(x1, right[k % 2][j]),
                    );
                    x1 = _mm256_xor_si256(rotated, x0);
                }
                x0 = _mm256_add_epi32(x0, add[2 + 2 * k]);
                x1 = _mm256_add_epi32(x1, add[3 + 2 * k]);
            }
            _mm256_storeu_si256(out0.add(i) as *mut __m256i, x0);
            _mm256_storeu_si256(out1.add(i) as *mut __m256i, x1);
            i += 8;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The twelve added words of Threefry-2x32-20's key schedule for `key`.
    fn key_schedule(key: [u32; 2]) -> [u32; 12] {
        let ks = [key[0], key[1], key[0] ^ key[1] ^ 0x1BD1_1BDA];
        let mut added = [ks[0], ks[1], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        for k in 0..5 {
            added[2 + 2 * k] = ks[(k + 1) % 3];
            added[3 + 2 * k] = ks[(k + 2) % 3].wrapping_add(k as u32 + 1);
        }
        added
    }

    /// Random123's known-answer vectors for threefry2x32_20.
    #[test]
    fn matches_random123_known_answers() {
        let cases = [
            ([0, 0], [0, 0], [0x6b20_0159, 0x99ba_4efe]),
            ([u32::MAX; 2], [u32::MAX; 2], [0x1cb9_96fc, 0xbb00_2be7]),
            (
                [0x1319_8a2e, 0x0370_7344],
                [0x243f_6a88, 0x85a3_08d3],
                [0xc492_3a9c, 0x483d_f7a0],
            ),
        ];
        for (key, counter, want) in cases {
            assert_eq!(
                rounds_scalar(counter[0], counter[1], &key_schedule(key)),
                want
            );
            // Through the vector paths: 37 copies (two 16-lane blocks and a tail).
            let (c0, c1) = (vec![counter[0]; 37], vec![counter[1]; 37]);
            let (mut o0, mut o1) = (vec![0; 37], vec![0; 37]);
            let added = key_schedule(key);
            unsafe {
                threefry_rounds(
                    Words::Array(c0.as_ptr()),
                    Words::Array(c1.as_ptr()),
                    &added,
                    o0.as_mut_ptr(),
                    o1.as_mut_ptr(),
                    37,
                    1,
                )
            };
            assert!(o0.iter().all(|&x| x == want[0]) && o1.iter().all(|&x| x == want[1]));
        }
    }

    /// Every path, one and two threads, array and splat counters, odd lengths: the scalar
    /// rounds' bits.
    #[test]
    fn vector_paths_and_threads_give_the_scalar_bits() {
        let added: [u32; 12] = std::array::from_fn(|k| 0x9e37_79b9u32.wrapping_mul(k as u32 + 7));
        for len in [1, 7, 15, 16, 17, 33, 100_003] {
            let c0: Vec<u32> = (0..len as u32).collect();
            let c1 = 0xdead_beefu32;
            for threads in [1, 2] {
                let (mut o0, mut o1) = (vec![0; len], vec![0; len]);
                unsafe {
                    threefry_rounds(
                        Words::Array(c0.as_ptr()),
                        Words::Splat(c1),
                        &added,
                        o0.as_mut_ptr(),
                        o1.as_mut_ptr(),
                        len,
                        threads,
                    )
                };
                for i in 0..len {
                    let want = rounds_scalar(c0[i], c1, &added);
                    assert_eq!(
                        [o0[i], o1[i]],
                        want,
                        "len {len}, threads {threads}, element {i}"
                    );
                }
            }
        }
    }

    /// The AVX2 path where AVX-512 would be chosen.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_path_gives_the_scalar_bits() {
        if !CpuFeatures::detect().avx2 {
            return;
        }
        let added: [u32; 12] = std::array::from_fn(|k| 0x85eb_ca6bu32.wrapping_mul(k as u32 + 1));
        let c0: Vec<u32> = (0..40u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let c1: Vec<u32> = (0..40u32).rev().collect();
        let (mut o0, mut o1) = (vec![0; 40], vec![0; 40]);
        let done = unsafe {
            x86::rounds_avx2(
                Words::Array(c0.as_ptr()),
                Words::Array(c1.as_ptr()),
                &added,
                o0.as_mut_ptr(),
                o1.as_mut_ptr(),
                0,
                40,
            )
        };
        assert_eq!(done, 40);
        for i in 0..40 {
            assert_eq!([o0[i], o1[i]], rounds_scalar(c0[i], c1[i], &added));
        }
    }
}
