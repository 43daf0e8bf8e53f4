//! The all-reduce combiner: a training step whose gradients are summed by separate
//! all-reduces gives bitwise the same values whether the pipeline combines them into one or
//! not (`all-reduce-combiner` disabled), on 2 and 4 replicas, on the JIT and the interpreter,
//! and on the data-parallel MNIST corpus module.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Module, Op};
use tessel_runtime::session::{compile, Device, Outputs, Program};

/// A data-parallel step: each replica shifts its batch by its id, and the gradients of `w`,
/// `b` and the loss are three all-reduces the combiner makes one.
const STEP: &str = r#"
HloModule dp_step
add_w {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
add_b {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  x = f32[8,4] parameter(0)
  w = f32[4,3] parameter(1)
  b = f32[3] parameter(2)
  id = u32[] replica-id()
  idf = f32[] convert(id)
  k = f32[] constant(0.37)
  shift = f32[] multiply(idf, k)
  sb = f32[8,4] broadcast(shift), dimensions={}
  xr = f32[8,4] add(x, sb)
  xw = f32[8,3] dot(xr, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,3] broadcast(b), dimensions={1}
  z = f32[8,3] add(xw, bb)
  y = f32[8,3] tanh(z)
  zero = f32[] constant(0)
  gb = f32[3] reduce(y, zero), dimensions={0}, to_apply=add_b
  gw = f32[4,3] dot(xr, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  yy = f32[8,3] multiply(y, y)
  loss = f32[] reduce(yy, zero), dimensions={0,1}, to_apply=add_b
  sw = f32[4,3] all-reduce(gw), replica_groups={}, to_apply=add_w
  sbias = f32[3] all-reduce(gb), replica_groups={}, to_apply=add_b
  sloss = f32[] all-reduce(loss), replica_groups={}, to_apply=add_w
  lr = f32[] constant(0.01)
  lw = f32[4,3] broadcast(lr), dimensions={}
  uw = f32[4,3] multiply(sw, lw)
  w2 = f32[4,3] subtract(w, uw)
  lb = f32[3] broadcast(lr), dimensions={}
  ub = f32[3] multiply(sbias, lb)
  b2 = f32[3] subtract(b, ub)
  ROOT out = (f32[4,3], f32[3], f32[]) tuple(w2, b2, sloss)
}
"#;

fn array(dims: &[i64], seed: u32) -> Array {
    let n: i64 = dims.iter().product();
    // Values of mixed magnitude, so a change in the order of a sum would show in the bits.
    let data = (0..n as u32)
        .map(|i| {
            let v = ((i * 2654435761 + seed * 40503) % 1000) as f32 / 997.0 - 0.5;
            if i % 3 == 0 {
                v * 1000.0
            } else {
                v
            }
        })
        .collect();
    Array::new(
        ArrayShape::new(ElementType::F32, dims),
        ArrayData::F32(data),
    )
}

fn all_reduces_after_pipeline(module: &Module, disabled: &[&str]) -> usize {
    let mut m = module.clone();
    let opts = CompileOptions {
        disabled_passes: disabled.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    optimize(&mut m, &opts).unwrap();
    m.computations
        .iter()
        .map(|c| {
            c.instructions()
                .filter(|(_, i)| matches!(i.op, Op::AllReduce { .. }))
                .count()
        })
        .sum()
}

fn bytes(outputs: Outputs) -> Vec<Vec<u8>> {
    let leaves: Vec<Array> = match outputs {
        Outputs::Global(l) => l,
        Outputs::PerReplica(r) => r.into_iter().flatten().collect(),
    };
    leaves.iter().map(|a| a.data.to_le_bytes()).collect()
}

fn run(module: &Module, device: Device, inputs: &[Array]) -> Vec<Vec<u8>> {
    let program: Program = compile(module, &device).unwrap();
    let bound = program.bind_ordered(inputs.to_vec()).unwrap();
    bytes(program.run(&bound).unwrap())
}

/// Runs `module` on `device` with and without the combiner; the outputs must be the same bits.
fn check(name: &str, module: &Module, device: Device, inputs: &[Array]) {
    let uncombined = Device {
        disabled_passes: vec!["all-reduce-combiner".into()],
        ..device.clone()
    };
    let a = run(module, device, inputs);
    let b = run(module, uncombined, inputs);
    assert_eq!(a.len(), b.len(), "{name}: output count");
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(x == y, "{name}: output {i} differs once combined");
    }
}

#[test]
fn the_pipeline_combines_the_steps_all_reduces_into_one() {
    let module = parse_module(STEP, None).unwrap();
    assert_eq!(all_reduces_after_pipeline(&module, &[]), 1);
    assert_eq!(
        all_reduces_after_pipeline(&module, &["all-reduce-combiner"]),
        3
    );
}

#[test]
fn combined_step_is_bitwise_the_separate_one_on_2_and_4_replicas() {
    let module = parse_module(STEP, None).unwrap();
    let inputs = [array(&[8, 4], 1), array(&[4, 3], 2), array(&[3], 3)];
    for replicas in [2, 4] {
        for device in [Device::jit(), Device::interpreter()] {
            let name = format!("{:?} x{replicas}", device.backend);
            check(&name, &module, device.with_replicas(replicas), &inputs);
        }
    }
}

#[test]
fn combined_mnist_cnn_step_is_bitwise_the_separate_one() {
    let name = "dp_mnist_cnn_train_step_r4_b32";
    let module = tessel_tests::corpus_module(name);
    assert!(
        all_reduces_after_pipeline(&module, &[])
            < all_reduces_after_pipeline(&module, &["all-reduce-combiner"])
    );
    let inputs = tessel_tests::corpus_arrays(&format!("{name}.inputs.safetensors"));
    check(name, &module, Device::jit().with_replicas(4), &inputs);
}

#[test]
fn disabling_a_pass_the_pipeline_lacks_is_an_error() {
    let mut m = parse_module(STEP, None).unwrap();
    let opts = CompileOptions {
        disabled_passes: vec!["all-reduce-combinr".into()],
        ..Default::default()
    };
    let e = optimize(&mut m, &opts).unwrap_err().to_string();
    assert!(
        e.contains("all-reduce-combinr") && e.contains("no such pass"),
        "{e}"
    );
}
