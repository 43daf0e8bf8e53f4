//! The JIT takes every arena offset from the compiler's buffer assignment with its needs
//! (`jit::arena_plan`): on corpus modules after the default pipeline, the program's arena is
//! the assignment's peak, every value it places is at the assignment's offsets, the scratch it
//! asks for is the scratch the assignment planned, and every buffer is 64-byte aligned.

use std::collections::BTreeMap;
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::Module;
use tessel_compiler::passes::BufferKind;
use tessel_compiler::training_loop::wrap_in_training_loop;
use tessel_runtime::arena::BUFFER_ALIGN;
use tessel_runtime::jit::arena_plan::plan_arena;
use tessel_runtime::jit::{compile, JitOptions};
use tessel_runtime::shard_map::{is_shard_map_module, per_replica_module};
use tessel_tests::corpus_dir;

fn corpus_module(file: &str) -> Module {
    parse_module_file(&corpus_dir().unwrap().join(file)).unwrap()
}

/// Optimizes `m` as `tessel compile` does, then checks the program against the assignment.
fn check(what: &str, mut m: Module) {
    optimize(&mut m, &CompileOptions::default()).unwrap();
    if is_shard_map_module(&m) {
        m = per_replica_module(&m).unwrap();
    }
    let options = JitOptions::default();
    let exe = compile(&m, &options).unwrap();
    let plan = plan_arena(&m, &options);
    let stats = exe.stats();

    assert_eq!(
        stats.arena_bytes, plan.peak_bytes as usize,
        "{what}: JIT arena and assignment peak"
    );
    assert!(!stats.placements.is_empty(), "{what}: no value placed");
    for (key, offsets) in &stats.placements {
        let planned: Vec<usize> = plan.value_buffers[key]
            .iter()
            .flatten()
            .map(|&b| plan.buffers[b].offset as usize)
            .collect();
        assert_eq!(offsets, &planned, "{what}: offsets of {key:?}");
    }

    let mut asked: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (name, bytes) in &stats.scratch {
        asked.entry(name.clone()).or_default().push(*bytes as i64);
    }
    let mut planned: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (&(inst, id), buffers) in &plan.scratch_buffers {
        let name = m.computation(plan.instances[inst]).get(id).name.clone();
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
    eprintln!(
        "{what}: arena {} bytes (lower bound {}), {} buffers, {} scratch requests",
        stats.arena_bytes,
        plan.lower_bound_bytes,
        plan.buffers.len(),
        stats.scratch.len()
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
    // Images, labels and key are fed per iteration (see the corpus README).
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
