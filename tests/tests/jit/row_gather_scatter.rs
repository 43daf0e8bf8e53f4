//! Gathers and scatter-adds of whole rows (`runtime/src/jit/host/row_gather_scatter.rs`):
//! the JIT takes the row path for the shapes an embedding lookup and its gradient have (as
//! tessel's `Embedding` and JAX write them), and gives bitwise the interpreter's result on
//! random shapes: repeated and out-of-range ids (of signed, unsigned and 64-bit index types),
//! several index dimensions, rows not a multiple of the vector width, one update and
//! thousands. Forms the row path declines (a multiply combiner, a partial slice, batching
//! dimensions) still match through the general path.

use super::fold::xorshift;
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{
    Array, ArrayData, ArrayShape, ElementType, GatherDimensionNumbers, Literal, Module, Op,
};
use tessel_runtime::jit::host::row_gather_scatter::{row_gather, row_scatter_add};
use tessel_runtime::jit::{compile, JitOptions};

const REGIONS: &str = "add {\n  xa = f32[] parameter(0)\n  xb = f32[] parameter(1)\n  ROOT xr = f32[] add(xa, xb)\n}\n\n\
     add_swapped {\n  sa = f32[] parameter(0)\n  sb = f32[] parameter(1)\n  ROOT sr = f32[] add(sb, sa)\n}\n\n\
     add64 {\n  da = f64[] parameter(0)\n  db = f64[] parameter(1)\n  ROOT dr = f64[] add(da, db)\n}\n\n\
     mul {\n  ma = f32[] parameter(0)\n  mb = f32[] parameter(1)\n  ROOT mr = f32[] multiply(ma, mb)\n}\n\n";

fn module(body: &str) -> Module {
    let text = format!("HloModule rows\n\n{REGIONS}ENTRY main {{\n{body}\n}}\n");
    parse_module(&text, None).unwrap()
}

/// Whether the root of `m` (a gather or a scatter over parameters) takes the row path.
fn takes_row_path(m: &Module) -> bool {
    let entry = m.computation(m.entry);
    let root = entry.get(entry.root());
    let shape = |i: usize| {
        entry
            .get(root.operands()[i])
            .shape
            .as_array()
            .unwrap()
            .clone()
    };
    match &root.op {
        Op::Gather {
            dims, slice_sizes, ..
        } => row_gather(
            dims,
            slice_sizes,
            &shape(0),
            &shape(1),
            root.shape.as_array().unwrap(),
        )
        .is_some(),
        Op::Scatter { dims, to_apply, .. } => {
            row_scatter_add(m, dims, *to_apply, &shape(0), &shape(1), &shape(2)).is_some()
        }
        _ => panic!("not a gather or scatter"),
    }
}

/// The JIT's result of `m` on `args` is bitwise the interpreter's.
fn check_bitwise(m: &Module, args: &[Literal]) {
    let want = evaluate(m, args).unwrap();
    let got = compile(m, &JitOptions::default())
        .unwrap()
        .run(args)
        .unwrap();
    let (g, w) = (got.as_array().unwrap(), want.as_array().unwrap());
    assert_eq!(g.shape, w.shape);
    assert!(
        g.data.to_le_bytes() == w.data.to_le_bytes(),
        "the JIT differs from the interpreter"
    );
}

/// Floats of many magnitudes, so that the order of additions shows in the bits.
fn random_f32(dims: &[i64], seed: u64) -> Literal {
    let mut r = xorshift(seed);
    let n: i64 = dims.iter().product();
    let v = (0..n)
        .map(|_| (r(2_000_001) as f32 - 1e6) * 10f32.powi(r(7) as i32 - 3))
        .collect();
    Literal::Array(Array::f32(dims, v))
}

/// Ids in `[lo, hi)`, many repeated when the range is small.
fn ids(dims: &[i64], lo: i64, hi: i64, seed: u64) -> Literal {
    let mut r = xorshift(seed);
    let n: i64 = dims.iter().product();
    let v = (0..n)
        .map(|_| (lo + r((hi - lo) as u64) as i64) as i32)
        .collect();
    Literal::Array(Array::new(
        ArrayShape::new(ElementType::S32, dims),
        ArrayData::S32(v),
    ))
}

fn dims_text(d: &[i64]) -> String {
    d.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn embedding_lookup_takes_the_row_path_and_matches() {
    // `Embedding`'s form: implicit index vector dimension, the row kept as the last dim.
    for (seed, (v, d, batch)) in [
        (1, (7, 5, vec![3])),
        (2, (20, 128, vec![4, 9])),
        (3, (50, 3, vec![2, 3, 4])),
        (4, (1, 17, vec![1])),
        (5, (300, 33, vec![40, 50])),
    ] {
        let rank = batch.len();
        let mut out = batch.clone();
        out.push(d);
        let m = module(&format!(
            "  t = f32[{v},{d}] parameter(0)\n  i = s32[{}] parameter(1)\n  \
             ROOT g = f32[{}] gather(t, i), offset_dims={{{rank}}}, collapsed_slice_dims={{0}}, \
             start_index_map={{0}}, index_vector_dim={rank}, slice_sizes={{1,{d}}}",
            dims_text(&batch),
            dims_text(&out)
        ));
        assert!(takes_row_path(&m));
        // Ids from -3 to v + 3: some clamp at either end.
        let args = [
            random_f32(&[v, d], seed as u64 + 10),
            ids(&batch, -3, v + 3, seed as u64 + 20),
        ];
        check_bitwise(&m, &args);
    }
}

#[test]
fn gathers_with_index_vectors_of_several_components_match() {
    // JAX's form (explicit index vector dimension), two indexed dims in a permuted map, and a
    // kept size-1 indexed dim: operand [6,5,3,4], rows of 3x4.
    let m = module(
        "  t = f32[6,5,3,4] parameter(0)\n  i = s32[7,2] parameter(1)\n  \
         ROOT g = f32[7,1,3,4] gather(t, i), offset_dims={1,2,3}, collapsed_slice_dims={1}, \
         start_index_map={1,0}, index_vector_dim=1, slice_sizes={1,1,3,4}",
    );
    assert!(takes_row_path(&m));
    check_bitwise(
        &m,
        &[random_f32(&[6, 5, 3, 4], 31), ids(&[7, 2], -2, 8, 32)],
    );
}

#[test]
fn gathers_the_row_path_declines_still_match() {
    // A partial slice of each row, rows of two, and an index vector dimension in front.
    for body in [
        "  t = f32[9,6] parameter(0)\n  i = s32[5] parameter(1)\n  \
         ROOT g = f32[5,4] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, \
         start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}",
        "  t = f32[9,6] parameter(0)\n  i = s32[5] parameter(1)\n  \
         ROOT g = f32[5,2,6] gather(t, i), offset_dims={1,2}, collapsed_slice_dims={}, \
         start_index_map={0}, index_vector_dim=1, slice_sizes={2,6}",
        "  t = f32[9,6] parameter(0)\n  i = s32[1,5] parameter(1)\n  \
         ROOT g = f32[5,6] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, \
         start_index_map={0}, index_vector_dim=0, slice_sizes={1,6}",
    ] {
        let m = module(body);
        assert!(!takes_row_path(&m), "{body}");
        let idx_dims: &[i64] = if body.contains("s32[1,5]") {
            &[1, 5]
        } else {
            &[5]
        };
        check_bitwise(&m, &[random_f32(&[9, 6], 41), ids(idx_dims, -4, 13, 42)]);
    }
}

/// A scatter of `updates` rows into an operand of `operand` dims with combiner `comb`, ids
/// as `s32[n,1]` (JAX's form) or `s32[n]` (the implicit form).
fn scatter_module(comb: &str, ty: &str, v: i64, d: i64, n: i64, explicit: bool) -> Module {
    let idx = if explicit {
        format!("s32[{n},1]")
    } else {
        format!("s32[{n}]")
    };
    module(&format!(
        "  x = {ty}[{v},{d}] parameter(0)\n  i = {idx} parameter(1)\n  u = {ty}[{n},{d}] parameter(2)\n  \
         ROOT s = {ty}[{v},{d}] scatter(x, i, u), update_window_dims={{1}}, \
         inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, \
         to_apply={comb}"
    ))
}

#[test]
fn scatter_adds_take_the_row_path_and_match_bitwise() {
    // Few rows and many updates, so each row sums dozens of updates whose order shows in
    // the bits; out-of-range ids are skipped.
    for (seed, (v, d, n, explicit, comb)) in [
        (10, 5, 1, true, "add"),
        (10, 5, 3000, false, "add"),
        (37, 131, 2500, true, "add_swapped"),
        (200, 128, 64, false, "add"),
        (3, 1, 1000, true, "add"),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = seed as u64;
        let m = scatter_module(comb, "f32", v, d, n, explicit);
        assert!(takes_row_path(&m));
        let idx_dims: Vec<i64> = if explicit { vec![n, 1] } else { vec![n] };
        check_bitwise(
            &m,
            &[
                random_f32(&[v, d], seed + 50),
                ids(&idx_dims, -2, v + 2, seed + 60),
                random_f32(&[n, d], seed + 70),
            ],
        );
    }
}

#[test]
fn f64_scatter_adds_and_several_index_dims_match() {
    let m = scatter_module("add64", "f64", 11, 9, 700, true);
    assert!(takes_row_path(&m));
    let f64s = |lit: Literal| match lit {
        Literal::Array(a) => {
            let ArrayData::F32(v) = a.data else {
                unreachable!()
            };
            Literal::Array(Array::new(
                ArrayShape::new(ElementType::F64, &a.shape.dims),
                ArrayData::F64(v.iter().map(|&x| x as f64 / 3.0).collect()),
            ))
        }
        other => other,
    };
    check_bitwise(
        &m,
        &[
            f64s(random_f32(&[11, 9], 81)),
            ids(&[700, 1], -1, 12, 82),
            f64s(random_f32(&[700, 9], 83)),
        ],
    );

    // Index vectors (row, col) into [4,5,7]: rows of 7, two batch dims of updates.
    let m = module(
        "  x = f32[4,5,7] parameter(0)\n  i = s32[30,20,2] parameter(1)\n  \
         u = f32[30,20,7] parameter(2)\n  \
         ROOT s = f32[4,5,7] scatter(x, i, u), update_window_dims={2}, \
         inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=2, \
         to_apply=add",
    );
    assert!(takes_row_path(&m));
    check_bitwise(
        &m,
        &[
            random_f32(&[4, 5, 7], 91),
            ids(&[30, 20, 2], -1, 6, 92),
            random_f32(&[30, 20, 7], 93),
        ],
    );
}

#[test]
fn scatters_the_row_path_declines_still_match() {
    // A multiply combiner.
    let m = scatter_module("mul", "f32", 6, 4, 20, true);
    assert!(!takes_row_path(&m));
    check_bitwise(
        &m,
        &[
            random_f32(&[6, 4], 101),
            ids(&[20, 1], -1, 7, 102),
            random_f32(&[20, 4], 103),
        ],
    );
    // Windows of part of a row.
    let m = module(
        "  x = f32[6,5] parameter(0)\n  i = s32[20,1] parameter(1)\n  u = f32[20,3] parameter(2)\n  \
         ROOT s = f32[6,5] scatter(x, i, u), update_window_dims={1}, \
         inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, \
         to_apply=add",
    );
    assert!(!takes_row_path(&m));
    check_bitwise(
        &m,
        &[
            random_f32(&[6, 5], 111),
            ids(&[20, 1], -1, 7, 112),
            random_f32(&[20, 3], 113),
        ],
    );
}

#[test]
fn the_row_gather_needs_no_batching_dims() {
    let dims = GatherDimensionNumbers {
        offset_dims: vec![],
        collapsed_slice_dims: vec![1],
        start_index_map: vec![1],
        index_vector_dim: 2,
        operand_batching_dims: vec![0],
        start_indices_batching_dims: vec![0],
    };
    let f = |d: &[i64]| ArrayShape::new(ElementType::F32, d);
    let s = |d: &[i64]| ArrayShape::new(ElementType::S32, d);
    assert!(row_gather(&dims, &[1, 1], &f(&[2, 3]), &s(&[2, 2, 1]), &f(&[2, 2])).is_none());
}

#[test]
fn index_types_other_than_s32_match() {
    // Unsigned ids past every row (one beyond i64's range) clamp to the last row in a gather
    // and are skipped by a scatter; signed 64-bit ids below zero clamp or are skipped.
    let lit = |t: ElementType, d: &[i64], data: ArrayData| {
        Literal::Array(Array::new(ArrayShape::new(t, d), data))
    };
    let u64_ids = lit(
        ElementType::U64,
        &[5],
        ArrayData::U64(vec![0, 3, u64::MAX, 1 << 63, 2]),
    );
    let s64_ids = lit(
        ElementType::S64,
        &[5, 1],
        ArrayData::S64(vec![-1, 3, 1, i64::MIN, 3]),
    );
    let u8_ids = lit(
        ElementType::U8,
        &[5, 1],
        ArrayData::U8(vec![0, 3, 255, 1, 3]),
    );
    for (ids, ty, idx) in [
        (u64_ids, "u64", "[5]"),
        (s64_ids, "s64", "[5,1]"),
        (u8_ids, "u8", "[5,1]"),
    ] {
        let g = module(&format!(
            "  t = f32[4,6] parameter(0)\n  i = {ty}{idx} parameter(1)\n  \
             ROOT g = f32[5,6] gather(t, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, \
             start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,6}}"
        ));
        assert!(takes_row_path(&g));
        check_bitwise(&g, &[random_f32(&[4, 6], 121), ids.clone()]);
        let s = module(&format!(
            "  x = f32[4,6] parameter(0)\n  i = {ty}{idx} parameter(1)\n  u = f32[5,6] parameter(2)\n  \
             ROOT s = f32[4,6] scatter(x, i, u), update_window_dims={{1}}, \
             inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, \
             to_apply=add"
        ));
        assert!(takes_row_path(&s));
        check_bitwise(
            &s,
            &[random_f32(&[4, 6], 122), ids, random_f32(&[5, 6], 123)],
        );
    }
}

/// The JIT's result of `m` on `args` on `threads` threads, as bytes.
fn jit_bytes(m: &Module, args: &[Literal], threads: usize) -> Vec<u8> {
    let options = JitOptions {
        gemm_threads: threads,
        ..Default::default()
    };
    let got = compile(m, &options).unwrap().run(args).unwrap();
    got.as_array().unwrap().data.to_le_bytes()
}

/// Gathers and scatter-adds large enough to share out between threads (each thread takes a
/// range of the gathered rows, or of the operand's rows with the updates that fall in it)
/// give the interpreter's bits on 1, 2 and 3 threads: repeated ids sum in the same order, and
/// out-of-range ids clamp or are skipped as on one thread.
#[test]
fn large_row_gathers_and_scatter_adds_give_the_same_bits_on_any_thread_count() {
    let (v, d, n) = (1500, 96, 4000);
    let gather = module(&format!(
        "  t = f32[{v},{d}] parameter(0)\n  i = s32[{n}] parameter(1)\n  \
         ROOT g = f32[{n},{d}] gather(t, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, \
         start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{d}}}"
    ));
    let scatter = scatter_module("add", "f32", v, d, n, false);
    for m in [&gather, &scatter] {
        assert!(takes_row_path(m));
    }
    let gather_args = [random_f32(&[v, d], 81), ids(&[n], -5, v + 5, 82)];
    // Ids from a tenth of the rows: each sums dozens of updates.
    let scatter_args = [
        random_f32(&[v, d], 83),
        ids(&[n], -5, v / 10, 84),
        random_f32(&[n, d], 85),
    ];
    for (m, args) in [(&gather, &gather_args[..]), (&scatter, &scatter_args[..])] {
        check_bitwise_on_1_to_3_threads(m, args);
    }
}

/// The JIT's result of `m` on `args` is bitwise the interpreter's on 1, 2 and 3 threads.
fn check_bitwise_on_1_to_3_threads(m: &Module, args: &[Literal]) {
    let want = evaluate(m, args)
        .unwrap()
        .as_array()
        .unwrap()
        .data
        .to_le_bytes();
    for threads in 1..=3 {
        assert!(
            jit_bytes(m, args, threads) == want,
            "{threads} threads differ from the interpreter"
        );
    }
}

/// A scatter-add over a value the program computed (an embedding's gradient starts from a
/// broadcast zero) writes in place: the JIT's buffer assignment gives the two one buffer, and
/// the result is the interpreter's bits on 1, 2 and 3 threads, each thread adding only the
/// updates whose rows fall in its ranges.
#[test]
fn a_scatter_add_over_a_computed_operand_adds_in_place() {
    use tessel_compiler::passes::assign_buffers_with;
    use tessel_runtime::jit::arena_plan::JitBufferNeeds;
    let (v, d, n) = (1500, 96, 4000);
    let m = module(&format!(
        "  x = f32[{v},{d}] parameter(0)\n  i = s32[{n}] parameter(1)\n  u = f32[{n},{d}] parameter(2)\n  \
         e = f32[{v},{d}] multiply(x, x)\n  \
         ROOT s = f32[{v},{d}] scatter(e, i, u), update_window_dims={{1}}, \
         inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, \
         to_apply=add"
    ));
    assert!(takes_row_path(&m));
    let a = assign_buffers_with(&m, &JitBufferNeeds::new(JitOptions::default()));
    assert!(
        a.buffers
            .iter()
            .any(|b| b.values.iter().any(|x| x == "e") && b.values.iter().any(|x| x == "s")),
        "the scatter does not write over its operand"
    );
    let args = [
        random_f32(&[v, d], 91),
        ids(&[n], -5, v + 5, 92),
        random_f32(&[n, d], 93),
    ];
    check_bitwise_on_1_to_3_threads(&m, &args);
}
