//! Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
//! SC 2011; the Random123 reference and JAX's PRNG), on the host and traced for the device.
//!
//! Chosen because it is counter-based: value `i` of a stream is `threefry(key, i)`, a pure
//! function, so a variable's initial value depends only on (seed, name), and a device op can
//! draw any element in parallel from (seed, step, replica, op, index) with u32 adds, rotations
//! and xors, which every backend runs bit-exactly. The host and device versions give the same
//! bits (tested), and both match Random123's known-answer vectors.

use tessel_compiler::passes::threefry_rounds::{
    key_words, rounds, THREEFRY_PARITY as PARITY, THREEFRY_ROTATIONS as ROTATIONS,
};
use tessel_compiler::trace::Tensor;

/// One Threefry-2x32-20 block: the two output words for `counter` under `key` (the rounds are
/// the compiler's, the reference the device's custom call is checked against).
pub fn threefry2x32(key: [u32; 2], counter: [u32; 2]) -> [u32; 2] {
    rounds(counter[0], counter[1], &key_words(key))
}

/// `x` rotated left by `r` bits (u32 tensor).
#[track_caller]
fn rotate_left(x: &Tensor, r: u32) -> Tensor {
    let left = x.shift_left(&x.scalar_like(r as f64));
    let right = x.shift_right_logical(&x.scalar_like((32 - r) as f64));
    left.bitwise_or(&right)
}

/// Threefry-2x32-20 traced on u32 tensors: `key` words are scalars (or broadcast against
/// the counters), `counter` words have one shape; gives the two output words of that shape.
#[track_caller]
pub(crate) fn threefry2x32_traced(key: [&Tensor; 2], counter: [Tensor; 2]) -> [Tensor; 2] {
    let parity = key[0].scalar_like(PARITY as f64);
    let ks2 = key[0].bitwise_xor(key[1]).bitwise_xor(&parity);
    let ks = [key[0].clone(), key[1].clone(), ks2];
    let [x0, x1] = counter;
    let mut x0 = x0 + &ks[0];
    let mut x1 = x1 + &ks[1];
    for i in 0..5 {
        for &r in &ROTATIONS[i % 2] {
            x0 = &x0 + &x1;
            x1 = rotate_left(&x1, r).bitwise_xor(&x0);
        }
        x0 = x0 + &ks[(i + 1) % 3];
        let injected = &ks[(i + 2) % 3] + &ks[0].scalar_like(i as f64 + 1.0);
        x1 = x1 + injected;
    }
    [x0, x1]
}

/// The two key words of a 64-bit seed (high word first).
pub fn seed_key(seed: i64) -> [u32; 2] {
    let s = seed as u64;
    [(s >> 32) as u32, s as u32]
}

/// FNV-1a (64-bit) of a name: how a variable's name enters its key.
pub(crate) fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A stream of random numbers on the host: block `i` is `threefry2x32(key, i)`.
pub struct HostStream {
    key: [u32; 2],
    block: u64,
    spare: Option<u32>,
}

impl HostStream {
    pub fn new(key: [u32; 2]) -> HostStream {
        HostStream {
            key,
            block: 0,
            spare: None,
        }
    }

    pub(crate) fn next_u32(&mut self) -> u32 {
        if let Some(w) = self.spare.take() {
            return w;
        }
        let [a, b] = threefry2x32(self.key, [self.block as u32, (self.block >> 32) as u32]);
        self.block += 1;
        self.spare = Some(b);
        a
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        let hi = (self.next_u32() >> 5) as u64; // 27 bits
        let lo = (self.next_u32() >> 6) as u64; // 26 bits
        ((hi << 26) | lo) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller; the first of the pair).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]: the log is finite
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's known-answer vectors for threefry2x32_20 (kat_vectors).
    #[test]
    fn matches_random123_known_answers() {
        assert_eq!(threefry2x32([0, 0], [0, 0]), [0x6b20_0159, 0x99ba_4efe]);
        assert_eq!(
            threefry2x32([u32::MAX, u32::MAX], [u32::MAX, u32::MAX]),
            [0x1cb9_96fc, 0xbb00_2be7]
        );
        assert_eq!(
            threefry2x32([0x1319_8a2e, 0x0370_7344], [0x243f_6a88, 0x85a3_08d3]),
            [0xc492_3a9c, 0x483d_f7a0]
        );
    }

    #[test]
    fn host_stream_is_uniform_and_normal() {
        let mut s = HostStream::new([1, 2]);
        let n = 100_000;
        let u: Vec<f64> = (0..n).map(|_| s.uniform()).collect();
        let mean = u.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
        assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
        let z: Vec<f64> = (0..n).map(|_| s.normal()).collect();
        let m = z.iter().sum::<f64>() / n as f64;
        let v = z.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        assert!(m.abs() < 0.02 && (v - 1.0).abs() < 0.02, "{m} {v}");
    }
}
