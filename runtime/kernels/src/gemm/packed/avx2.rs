//! The AVX2 + FMA micro-kernel of the packed product: a 6 x 16 block of `c` in twelve 8-lane
//! registers, fed per step of `k` by two vectors of a packed `b` panel and six broadcasts
//! from a packed `a` panel (both contiguous, so every load is a sequential one).

use std::arch::x86_64::*;

use super::{MR, NR};

/// `c (MR x NR, row stride ldc) = start + a_panel * b_panel` over `kc` steps, where `start`
/// is `c` itself when `from_c`, else zero. `a_panel` holds `kc` groups of `MR` values, `b_panel`
/// `kc` groups of `NR`. Each element of `c` is one fused multiply-add chain over the steps in
/// order.
///
/// # Safety
/// The panels must hold `kc` steps; `c` must address `MR` rows of `NR` floats `ldc` apart;
/// the CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile(
    kc: usize,
    a_panel: *const f32,
    b_panel: *const f32,
    c: *mut f32,
    ldc: usize,
    from_c: bool,
) {
    let mut r = [[_mm256_setzero_ps(); 2]; MR];
    if from_c {
        for (i, ri) in r.iter_mut().enumerate() {
            ri[0] = _mm256_loadu_ps(c.add(i * ldc));
            ri[1] = _mm256_loadu_ps(c.add(i * ldc + 8));
        }
    }
    let (mut ap, mut bp) = (a_panel, b_panel);
    for _ in 0..kc {
        let b0 = _mm256_loadu_ps(bp);
        let b1 = _mm256_loadu_ps(bp.add(8));
        for (i, ri) in r.iter_mut().enumerate() {
            let x = _mm256_broadcast_ss(&*ap.add(i));
            ri[0] = _mm256_fmadd_ps(x, b0, ri[0]);
            ri[1] = _mm256_fmadd_ps(x, b1, ri[1]);
        }
        ap = ap.add(MR);
        bp = bp.add(NR);
    }
    for (i, ri) in r.iter().enumerate() {
        _mm256_storeu_ps(c.add(i * ldc), ri[0]);
        _mm256_storeu_ps(c.add(i * ldc + 8), ri[1]);
    }
}

/// Asks for the `MR` rows of a register block of `c` (`NR` floats each, `ldc` apart) to be
/// brought into L1 while the block before it is computed: rows of a wide `c` are pages apart,
/// and the kernel's first loads of them would otherwise wait for memory.
#[inline]
pub(super) fn prefetch_tile(c: *const f32, ldc: usize) {
    for i in 0..MR {
        let row = c.wrapping_add(i * ldc) as *const i8;
        // SAFETY: a prefetch does not fault, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(row);
            _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(NR * 4 - 1));
        }
    }
}
