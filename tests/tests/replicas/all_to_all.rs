//! all-to-all on 6 replicas (`tests/mpi/all_to_all.hlo`, also run across processes by
//! `tests/mpi/run.sh`): the array form on every replica, on 1-D and 2-D groups, on a group
//! listed out of order and along the inner dimension, and the tuple form, against values worked
//! out by hand from XLA's definition; the JIT gives the interpreter's bits. And a module JAX
//! wrote with `lax.all_to_all` gives JAX's numbers.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::ir::{Array, ArrayData, Literal, Module};
use tessel_runtime::host_io::read_safetensors;
use tessel_runtime::jit::{compile, JitOptions};
use tessel_runtime::replicas::evaluate_replicated;
use tessel_runtime::session::{self, Device, Outputs};

fn module() -> Module {
    parse_module(include_str!("../../mpi/all_to_all.hlo"), None).unwrap_or_else(|e| panic!("{e}"))
}

/// Replica r's x: element (i, j) is 100 r + 10 i + j, so every value names where it came from.
fn x(r: usize) -> Array {
    let v = (0..6)
        .flat_map(|i| (0..2).map(move |j| (100 * r + 10 * i + j) as f32))
        .collect();
    Array::f32(&[6, 2], v)
}

fn inputs() -> Vec<Vec<Literal>> {
    (0..6).map(|r| vec![Literal::Array(x(r))]).collect()
}

fn f32_data(a: &Array) -> &[f32] {
    match &a.data {
        ArrayData::F32(v) => v,
        other => panic!("expected f32, got {other:?}"),
    }
}

/// Rows of (replica, row, column) origins, written as 100 replica + 10 row + column.
fn rows(origins: &[[usize; 2]]) -> Vec<f32> {
    origins
        .iter()
        .flat_map(|o| o.iter().map(|&v| v as f32))
        .collect()
}

/// The array form along dimension 0 by XLA's definition: the member at `position` of
/// `group` gets chunk `position` of each member's x, in group order.
fn split_rows(group: &[usize], position: usize) -> Vec<f32> {
    let chunk = 6 / group.len();
    let origins: Vec<[usize; 2]> = group
        .iter()
        .flat_map(|&m| {
            (position * chunk..(position + 1) * chunk)
                .map(move |i| [100 * m + 10 * i, 100 * m + 10 * i + 1])
        })
        .collect();
    rows(&origins)
}

fn group_of(groups: &[&[usize]], r: usize) -> (Vec<usize>, usize) {
    let g = groups.iter().find(|g| g.contains(&r)).unwrap();
    (g.to_vec(), g.iter().position(|&m| m == r).unwrap())
}

fn check(out: &[Literal], what: &str) {
    assert_eq!(out.len(), 6);
    let leaves: Vec<Vec<&Array>> = out.iter().map(|l| l.leaves()).collect();
    // By hand, replica 4: `every` holds row 4 of each replica; the pair group {0,4} gives
    // replica 4 the bottom halves of replica 0 and of itself.
    assert_eq!(
        f32_data(leaves[4][0]),
        rows(&[
            [40, 41],
            [140, 141],
            [240, 241],
            [340, 341],
            [440, 441],
            [540, 541]
        ]),
        "{what}: every, replica 4"
    );
    assert_eq!(
        f32_data(leaves[4][5]),
        rows(&[[30, 31], [40, 41], [50, 51]]),
        "{what}: pair0, replica 4"
    );
    assert_eq!(
        f32_data(leaves[4][6]),
        rows(&[[430, 431], [440, 441], [450, 451]]),
        "{what}: pair1, replica 4"
    );
    // Replica 0 in {5,0,3} is at position 1: rows 2..4 of replicas 5, 0 and 3.
    assert_eq!(
        f32_data(leaves[0][3]),
        rows(&[
            [520, 521],
            [530, 531],
            [20, 21],
            [30, 31],
            [320, 321],
            [330, 331]
        ]),
        "{what}: uneven, replica 0"
    );
    // Replica 3 in {2,3} along dimension 1: column 1 of replica 2, then of itself.
    assert_eq!(
        f32_data(leaves[3][4]),
        rows(&[
            [201, 301],
            [211, 311],
            [221, 321],
            [231, 331],
            [241, 341],
            [251, 351]
        ]),
        "{what}: inner, replica 3"
    );
    // Every replica, every group, by the definition.
    let all: &[usize] = &[0, 1, 2, 3, 4, 5];
    let layouts: [(&[&[usize]], usize); 4] = [
        (&[all], 0),
        (&[&[0, 1, 2], &[3, 4, 5]], 1),
        (&[&[0, 3], &[1, 4], &[2, 5]], 2),
        (&[&[5, 0, 3], &[1, 4, 2]], 3),
    ];
    for (r, got) in leaves.iter().enumerate() {
        for (groups, leaf) in layouts {
            let (g, p) = group_of(groups, r);
            assert_eq!(
                f32_data(got[leaf]),
                split_rows(&g, p),
                "{what}: output {leaf}, replica {r}"
            );
        }
        let (g, p) = group_of(&[&[0, 4], &[3, 1], &[2, 5]], r);
        for (q, &m) in g.iter().enumerate() {
            let sent = x(m);
            let half = &f32_data(&sent)[6 * p..6 * p + 6];
            assert_eq!(f32_data(got[5 + q]), half, "{what}: pair{q}, replica {r}");
        }
    }
}

#[test]
fn all_to_all_matches_the_definition_on_the_interpreter() {
    let out = evaluate_replicated(&module(), inputs()).unwrap();
    check(&out, "interpreter");
}

#[test]
fn all_to_all_on_the_jit_gives_the_interpreters_bits() {
    let m = module();
    let want = evaluate_replicated(&m, inputs()).unwrap();
    let mut optimized = m.clone();
    optimize(&mut optimized, &CompileOptions::default()).unwrap();
    for (what, module) in [("as parsed", &m), ("optimized", &optimized)] {
        let exe = compile(module, &JitOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let got = exe.run_replicated(inputs()).unwrap();
        check(&got, what);
        assert_eq!(got, want, "{what}");
    }
}

/// The arrays of `tests/mpi/FILE` in the order of their numeric keys.
fn mpi_arrays(file: &str) -> Vec<Array> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mpi")
        .join(file);
    let mut v = read_safetensors(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    v.sort_by_key(|(k, _)| k.parse::<usize>().expect("numeric keys"));
    v.into_iter().map(|(_, a)| a).collect()
}

/// JAX's `lax.all_to_all` in a `shard_map` over 4 devices (`tests/mpi/sm_all_to_all_r4.py`):
/// XLA's all-to-all with a channel (its groups name partitions), split and concatenated along
/// rows, and along columns followed by JAX's reshape and transpose. Both backends give JAX's
/// numbers: exactly, but for the tanh (each backend's own, within float tolerance).
#[test]
fn a_jax_shard_map_all_to_all_gives_jaxs_numbers() {
    let module = parse_module(include_str!("../../mpi/sm_all_to_all_r4.hlo"), None)
        .unwrap_or_else(|e| panic!("{e}"));
    let inputs = mpi_arrays("sm_all_to_all_r4.inputs.safetensors");
    let want = mpi_arrays("sm_all_to_all_r4.outputs.safetensors");
    for device in [Device::interpreter(), Device::jit()] {
        let program =
            session::compile(&module, &device.with_replicas(4)).unwrap_or_else(|e| panic!("{e}"));
        let bound = program.bind_ordered(inputs.clone()).unwrap();
        let Outputs::Global(got) = program.run(&bound).unwrap() else {
            panic!("a shard_map program gives global arrays")
        };
        assert_eq!(got.len(), 2);
        // a = 2 all-to-all(x) + 1: exact.
        assert_eq!(got[0], want[0]);
        assert_eq!(got[1].shape, want[1].shape);
        for (g, w) in f32_data(&got[1]).iter().zip(f32_data(&want[1])) {
            assert!(
                (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
                "{g} against JAX's {w}"
            );
        }
    }
}
