//! Randomness on the device: uniform floats drawn by Threefry-2x32 inside the traced step.
//!
//! Every random op of a step gets its own stream from four numbers:
//! - the graph seed (`tf_random_seed`, or the process seed when it is `None`, see
//!   [`resolve_seed`]), a constant of the trace;
//! - the global step and the replica id, read on the device, so every step and every replica
//!   draws different values while the compiled program stays the same;
//! - the op's number in the model_fn (0, 1, ... in tracing order), like TF's op-level seeds.
//!
//! The step key is `threefry(seed, [global_step, replica_id])`; op `k` with `n` elements
//! computes `threefry(step_key, [i, k])` for `i < ceil(n / 2)`, and its elements are the
//! first words followed by the second words. The same seed, step and replica give the same bits on the
//! interpreter and the JIT, so runs are reproducible.

use super::graph::Graph;
use super::threefry::{seed_key, threefry2x32_traced};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;

/// The seed used when `tf_random_seed` is `None`: drawn once per process (from the OS
/// randomness behind std's `RandomState`), so one process's graphs agree and two processes
/// differ, as TF draws its seed when none is set.
pub(crate) fn process_seed() -> i64 {
    static SEED: OnceLock<i64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish() as i64
    })
}

/// `tf_random_seed`, or the process seed when there is none.
pub(crate) fn resolve_seed(seed: Option<i64>) -> i64 {
    seed.unwrap_or_else(process_seed)
}

/// The key of this step on this replica: `threefry(seed, [global_step, replica_id])`, two
/// u32 scalars.
#[track_caller]
fn step_key(g: &mut Graph) -> [Tensor; 2] {
    let [k0, k1] = seed_key(resolve_seed(g.variables.seed()));
    let k0 = g.tracer.scalar(k0 as f64, ElementType::U32);
    let k1 = g.tracer.scalar(k1 as f64, ElementType::U32);
    let step = g.global_step.bitcast(ElementType::U32);
    let replica = g.tracer.replica_id();
    threefry2x32_traced([&k0, &k1], [step, replica])
}

/// Random u32 words of the given (fixed) shape, from this op's stream (see the module doc).
#[track_caller]
pub fn random_bits(g: &mut Graph, dims: &[i64]) -> Tensor {
    let op = g.next_random_op();
    g.tracer.push_scope("random_bits");
    let [k0, k1] = step_key(g);
    let n: i64 = dims.iter().product();
    let half = (n + 1) / 2;
    let index = g.tracer.iota([half.max(1)].as_slice(), ElementType::U32, 0);
    let op_word = index.scalar_like(op as f64);
    let [a, b] = threefry2x32_traced([&k0, &k1], [index.clone(), op_word.broadcast_like(&index)]);
    let words = a.concat(&[&b], 0).slice(&[0], &[n]).reshape(dims);
    g.tracer.pop_scope();
    words
}

/// Uniform f32 values in [0, 1) of the given (fixed) shape, drawn on the device: the top 23
/// bits of each word become the mantissa of a float in [1, 2), minus 1 (as JAX does).
#[track_caller]
pub fn random_uniform(g: &mut Graph, dims: &[i64]) -> Tensor {
    let bits = random_bits(g, dims);
    g.tracer.push_scope("random_uniform");
    let mantissa = bits.shift_right_logical(&bits.scalar_like(9.0));
    let one_to_two = mantissa
        .bitwise_or(&bits.scalar_like(0x3F80_0000u32 as f64))
        .bitcast(ElementType::F32);
    let u = one_to_two - 1.0;
    g.tracer.pop_scope();
    u
}
