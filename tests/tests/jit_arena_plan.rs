//! The compiler's buffer assignment with the JIT's needs (`jit::arena_plan`) against the
//! program the JIT compiles, on corpus modules after the default pipeline: the plan holds
//! exactly the scratch space the program asks for, instruction by instruction, places every
//! arena buffer at the JIT's alignment, and needs no more bytes than the arena the JIT lays
//! out itself today.

use std::collections::BTreeMap;
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::Module;
use tessel_compiler::passes::{optimize, BufferKind, CompileOptions};
use tessel_compiler::training_loop::wrap_in_training_loop;
use tessel_runtime::arena::BUFFER_ALIGN;
use tessel_runtime::jit::arena_plan::plan_arena;
use tessel_runtime::jit::{compile, JitOptions};
use tessel_runtime::shard_map::{is_shard_map_module, per_replica_module};
use tessel_tests::corpus_dir;

fn corpus_module(file: &str) -> Module {
    parse_module_file(&corpus_dir().unwrap().join(file)).unwrap()
}

/// Optimizes `m` as `tessel compile` does, then checks the plan against the JIT's program.
fn check(what: &str, mut m: Module) {
    optimize(&mut m, &CompileOptions::default()).unwrap();
    if is_shard_map_module(&m) {
        m = per_replica_module(&m).unwrap();
    }
    let options = JitOptions::default();
    let exe = compile(&m, &options).unwrap();
    let plan = plan_arena(&m, &options);

    let mut asked: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (name, bytes) in &exe.stats().scratch {
        asked.entry(name.clone()).or_default().push(*bytes as i64);
    }
    let mut planned: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (&(comp, id), buffers) in &plan.scratch_buffers {
        let name = m.computation(comp).get(id).name.clone();
        let sizes = planned.entry(name).or_default();
        sizes.extend(buffers.iter().map(|&b| plan.buffers[b].size));
    }
    assert_eq!(
        asked, planned,
        "{what}: scratch asked (left) and planned (right)"
    );

    for b in &plan.buffers {
        if b.kind == BufferKind::Constant {
            assert_eq!(
                b.offset, -1,
                "{what}: a constant in the arena: {:?}",
                b.values
            );
        } else {
            assert_eq!(b.offset % BUFFER_ALIGN as i64, 0, "{what}: {:?}", b.values);
            assert!(
                b.offset + b.size <= plan.peak_bytes,
                "{what}: {:?}",
                b.values
            );
        }
    }
    // The switch to this plan must not grow the arena the JIT lays out today.
    assert!(
        plan.peak_bytes as usize <= exe.stats().arena_bytes,
        "{what}: plan {} bytes, JIT arena {} bytes",
        plan.peak_bytes,
        exe.stats().arena_bytes
    );
    eprintln!(
        "{what}: JIT arena {} bytes, assignment peak {} bytes (lower bound {}), {} scratch requests",
        exe.stats().arena_bytes,
        plan.peak_bytes,
        plan.lower_bound_bytes,
        exe.stats().scratch.len()
    );
}

#[test]
fn mnist_b8_step() {
    check(
        "mnist b8 step",
        corpus_module("mnist_cnn_train_step_b8.hlo"),
    );
}

#[test]
fn mnist_b8_step_as_a_loop_of_5() {
    let step = corpus_module("mnist_cnn_train_step_b8.hlo");
    // Images, labels and key are fed per iteration (see ../shared/hlo/README.md).
    let looped = wrap_in_training_loop(&step, 5, &[8, 9, 10]).unwrap();
    check("mnist b8 loop5", looped);
}

#[test]
fn fori_loop_sin() {
    check("fori_loop_sin", corpus_module("fori_loop_sin.hlo"));
}

#[test]
fn data_parallel_modules() {
    for file in [
        "dp_mnist_cnn_train_step_r4_b32.hlo",
        "dp_tanh_regression_r4.hlo",
    ] {
        check(file, corpus_module(file));
    }
}

#[test]
fn mnist_b128_step() {
    check(
        "mnist b128 step",
        corpus_module("mnist_cnn_train_step_b128.hlo"),
    );
}
