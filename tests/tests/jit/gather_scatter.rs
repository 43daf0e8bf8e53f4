//! `gather` and `scatter` on the interpreter against values worked out by hand, and on the
//! JIT (as written and optimized) against the interpreter, bitwise: clamped gather starts,
//! collapsed dimensions, batches of index vectors, batching dimensions, scatter-add with
//! duplicate and out-of-bounds indices, a general combiner applied in index order, zero-size
//! arrays, and the gradients of both.

use tessel_compiler::autodiff::grad_module;
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::{parse_module, print_module, PrintOptions};
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal, Module};
use tessel_runtime::jit::{compile, JitOptions};

const REGIONS: &str = "add {\n  xa = f32[] parameter(0)\n  xb = f32[] parameter(1)\n  ROOT xr = f32[] add(xa, xb)\n}\n\n\
     assign {\n  ya = f32[] parameter(0)\n  ROOT yb = f32[] parameter(1)\n}\n\n\
     times_ten_plus {\n  za = f32[] parameter(0)\n  zb = f32[] parameter(1)\n  ten = f32[] constant(10)\n  zm = f32[] multiply(za, ten)\n  ROOT zr = f32[] add(zm, zb)\n}\n\n";

fn module(body: &str) -> Module {
    let text = format!("HloModule gather_scatter\n\n{REGIONS}ENTRY main {{\n{body}\n}}\n");
    parse_module(&text, None).unwrap()
}

/// The interpreter's value of `m` on `args`, after checking the JIT gives the same bits, as
/// written and optimized.
fn run_both(m: &Module, args: &[Literal]) -> Literal {
    let want = evaluate(m, args).unwrap();
    for opt in [false, true] {
        let mut m = m.clone();
        if opt {
            optimize(&mut m, &CompileOptions::default()).unwrap();
            assert_eq!(evaluate(&m, args).unwrap(), want, "optimized interpreter");
        }
        let got = compile(&m, &JitOptions::default())
            .unwrap()
            .run(args)
            .unwrap();
        let (g, w) = (got.leaves(), want.leaves());
        assert_eq!(g.len(), w.len());
        for (x, y) in g.iter().zip(&w) {
            assert_eq!(x.shape, y.shape, "opt={opt}");
            assert_eq!(
                x.data.to_le_bytes(),
                y.data.to_le_bytes(),
                "opt={opt}: the JIT differs from the interpreter: {:?} vs {:?}",
                x.data,
                y.data
            );
        }
    }
    want
}

fn check(body: &str, args: &[Literal], want: &[f32]) {
    let out = run_both(&module(body), args);
    let a = out.as_array().expect("an array");
    assert_eq!(a.data, ArrayData::F32(want.to_vec()));
}

fn f32s(dims: &[i64], v: Vec<f32>) -> Literal {
    Literal::Array(Array::f32(dims, v))
}

fn iota_f32(dims: &[i64]) -> Literal {
    let n: i64 = dims.iter().product();
    f32s(dims, (0..n).map(|x| x as f32).collect())
}

fn s32s(dims: &[i64], v: Vec<i32>) -> Literal {
    Literal::Array(Array::new(
        ArrayShape::new(ElementType::S32, dims),
        ArrayData::S32(v),
    ))
}

#[test]
fn gather_clamps_starts_so_the_slice_fits() {
    // Rows [start, start+2) of a 4x3 table; -1 clamps to 0, 3 clamps to 2.
    check(
        "  t = f32[4,3] parameter(0)\n  i = s32[3] parameter(1)\n  \
         ROOT g = f32[3,2,3] gather(t, i), offset_dims={1,2}, collapsed_slice_dims={}, \
         start_index_map={0}, index_vector_dim=1, slice_sizes={2,3}",
        &[iota_f32(&[4, 3]), s32s(&[3], vec![-1, 2, 3])],
        &[
            0., 1., 2., 3., 4., 5., //
            6., 7., 8., 9., 10., 11., //
            6., 7., 8., 9., 10., 11.,
        ],
    );
}

#[test]
fn gather_collapsed_dims_and_a_batch_of_index_vectors() {
    // Index vectors (row, col) along dimension 2 of a 2x2 batch; slices of 1x2, row collapsed.
    check(
        "  t = f32[3,4] parameter(0)\n  i = s32[2,2,2] parameter(1)\n  \
         ROOT g = f32[2,2,2] gather(t, i), offset_dims={2}, collapsed_slice_dims={0}, \
         start_index_map={0,1}, index_vector_dim=2, slice_sizes={1,2}",
        &[
            iota_f32(&[3, 4]),
            s32s(&[2, 2, 2], vec![0, 1, 2, 2, 1, 0, 5, -3]),
        ],
        // (0,1) -> 1,2; (2,2) -> 10,11; (1,0) -> 4,5; (5,-3) clamps to (2,0) -> 8,9.
        &[1., 2., 10., 11., 4., 5., 8., 9.],
    );
}

#[test]
fn gather_index_vectors_along_dimension_zero_with_a_permuted_map() {
    // Columns of the indices are (col, row) vectors: start_index_map={1,0}.
    check(
        "  t = f32[3,4] parameter(0)\n  i = s32[2,3] parameter(1)\n  \
         ROOT g = f32[3] gather(t, i), offset_dims={}, collapsed_slice_dims={0,1}, \
         start_index_map={1,0}, index_vector_dim=0, slice_sizes={1,1}, indices_are_sorted=true",
        &[iota_f32(&[3, 4]), s32s(&[2, 3], vec![1, 3, 0, 2, 0, 1])],
        // (col 1, row 2) -> 9; (col 3, row 0) -> 3; (col 0, row 1) -> 4.
        &[9., 3., 4.],
    );
}

#[test]
fn gather_with_batching_dims() {
    // take_along_axis: row b of the operand is indexed by row b of the indices.
    check(
        "  t = f32[2,3] parameter(0)\n  i = s32[2,2,1] parameter(1)\n  \
         ROOT g = f32[2,2] gather(t, i), offset_dims={}, collapsed_slice_dims={1}, \
         operand_batching_dims={0}, start_indices_batching_dims={0}, start_index_map={1}, \
         index_vector_dim=2, slice_sizes={1,1}",
        &[iota_f32(&[2, 3]), s32s(&[2, 2, 1], vec![2, 0, 1, 1])],
        &[2., 0., 4., 4.],
    );
}

#[test]
fn scatter_add_accumulates_duplicates_and_skips_out_of_bounds() {
    check(
        "  x = f32[4,2] parameter(0)\n  i = s32[4] parameter(1)\n  u = f32[4,2] parameter(2)\n  \
         ROOT s = f32[4,2] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, \
         scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
        &[
            f32s(&[4, 2], vec![1.; 8]),
            s32s(&[4], vec![1, 3, 1, 4]),
            f32s(&[4, 2], vec![1., 2., 10., 20., 100., 200., 1000., 2000.]),
        ],
        &[1., 1., 102., 203., 1., 1., 11., 21.],
    );
}

#[test]
fn scatter_applies_a_general_combiner_in_index_order() {
    // acc * 10 + update: element 0 gets 2 then 3 -> (1*10+2)*10+3.
    check(
        "  x = f32[2] parameter(0)\n  i = s32[3,1] parameter(1)\n  u = f32[3] parameter(2)\n  \
         ROOT s = f32[2] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, \
         scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=times_ten_plus",
        &[
            f32s(&[2], vec![1., 1.]),
            s32s(&[3, 1], vec![0, 0, 1]),
            f32s(&[3], vec![2., 3., 4.]),
        ],
        &[123., 14.],
    );
    // An assigning combiner: the last update in index order wins.
    check(
        "  x = f32[3] parameter(0)\n  i = s32[3,1] parameter(1)\n  u = f32[3] parameter(2)\n  \
         ROOT s = f32[3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, \
         scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=assign",
        &[
            f32s(&[3], vec![0., 0., 0.]),
            s32s(&[3, 1], vec![2, 0, 2]),
            f32s(&[3], vec![5., 6., 7.]),
        ],
        &[6., 0., 7.],
    );
}

#[test]
fn scatter_skips_a_window_that_does_not_fit() {
    // Windows of 2: start 3 fits in 5 elements, start 4 does not (the whole window is skipped,
    // not just its outside element), and start -1 neither. XLA:CPU gives the same
    // [0,0,0,1,2] (JAX 0.10.2, lax.scatter_add with mode=PROMISE_IN_BOUNDS, which emits the
    // raw scatter).
    check(
        "  x = f32[5] parameter(0)\n  i = s32[3,1] parameter(1)\n  u = f32[3,2] parameter(2)\n  \
         ROOT s = f32[5] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={}, \
         scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
        &[
            f32s(&[5], vec![0.; 5]),
            s32s(&[3, 1], vec![3, 4, -1]),
            f32s(&[3, 2], vec![1., 2., 3., 4., 5., 6.]),
        ],
        &[0., 0., 0., 1., 2.],
    );
}

#[test]
fn zero_size_gather_and_scatter() {
    check(
        "  t = f32[5,3] parameter(0)\n  i = s32[0,1] parameter(1)\n  \
         ROOT g = f32[0,3] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, \
         start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}",
        &[iota_f32(&[5, 3]), s32s(&[0, 1], vec![])],
        &[],
    );
    check(
        "  x = f32[2,3] parameter(0)\n  i = s32[0,1] parameter(1)\n  u = f32[0,3] parameter(2)\n  \
         ROOT s = f32[2,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, \
         scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
        &[
            iota_f32(&[2, 3]),
            s32s(&[0, 1], vec![]),
            f32s(&[0, 3], vec![]),
        ],
        &[0., 1., 2., 3., 4., 5.],
    );
    // A table with an empty row: every slice is empty.
    check(
        "  t = f32[4,0] parameter(0)\n  i = s32[2] parameter(1)\n  \
         ROOT g = f32[2,0] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, \
         start_index_map={0}, index_vector_dim=1, slice_sizes={1,0}",
        &[f32s(&[4, 0], vec![]), s32s(&[2], vec![1, 3])],
        &[],
    );
}

#[test]
fn gather_errors_instead_of_reading_outside_an_empty_operand() {
    // A collapsed dimension of slice size 0 over an empty operand: nothing to read.
    let m = module(
        "  t = f32[0,3] parameter(0)\n  i = s32[2] parameter(1)\n  \
         ROOT g = f32[2,3] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, \
         start_index_map={0}, index_vector_dim=1, slice_sizes={0,3}",
    );
    let args = [f32s(&[0, 3], vec![]), s32s(&[2], vec![0, 1])];
    let e = evaluate(&m, &args).unwrap_err();
    assert!(e.message.contains("reads outside the operand"), "{e}");
    let e = compile(&m, &JitOptions::default())
        .unwrap()
        .run(&args)
        .unwrap_err();
    assert!(e.to_string().contains("reads outside the operand"), "{e}");
}

#[test]
fn gradients_of_gather_and_scatter_add() {
    // loss = sum(gather(t, i) * w): d t = scatter-add of w at the gathered rows.
    let m = module(
        "  t = f32[3,2] parameter(0)\n  i = s32[3] parameter(1)\n  w = f32[3,2] parameter(2)\n  \
         g = f32[3,2] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, \
         start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}\n  \
         p = f32[3,2] multiply(g, w)\n  z = f32[] constant(0)\n  \
         ROOT l = f32[] reduce(p, z), dimensions={0,1}, to_apply=add",
    );
    let g = grad_module(&m, &[0]).unwrap();
    let args = [
        iota_f32(&[3, 2]),
        s32s(&[3], vec![2, 0, 2]),
        f32s(&[3, 2], vec![1., 2., 3., 4., 5., 6.]),
    ];
    let out = run_both(&g, &args);
    let parts = out.as_tuple().expect("(loss, grad)");
    // loss = (4*1 + 5*2) + (0*3 + 1*4) + (4*5 + 5*6) = 14 + 4 + 50.
    assert_eq!(parts[0].as_array().unwrap().data, ArrayData::F32(vec![68.]));
    assert_eq!(
        parts[1].as_array().unwrap().data,
        ArrayData::F32(vec![3., 4., 0., 0., 6., 8.])
    );

    // loss = sum(scatter-add(x, i, u) * w): d x = w, d u = w gathered at the scattered rows.
    let m = module(
        "  x = f32[3,2] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = f32[2,2] parameter(2)\n  \
         w = f32[3,2] parameter(3)\n  \
         s = f32[3,2] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, \
         scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n  \
         p = f32[3,2] multiply(s, w)\n  z = f32[] constant(0)\n  \
         ROOT l = f32[] reduce(p, z), dimensions={0,1}, to_apply=add",
    );
    let g = grad_module(&m, &[0, 2]).unwrap();
    let w = vec![1., 2., 3., 4., 5., 6.];
    let args = [
        f32s(&[3, 2], vec![0.; 6]),
        s32s(&[2, 1], vec![1, 1]),
        f32s(&[2, 2], vec![1., 1., 1., 1.]),
        f32s(&[3, 2], w.clone()),
    ];
    let out = run_both(&g, &args);
    let parts = out.as_tuple().expect("(loss, grads)");
    assert_eq!(parts[0].as_array().unwrap().data, ArrayData::F32(vec![14.]));
    assert_eq!(parts[1].as_array().unwrap().data, ArrayData::F32(w));
    assert_eq!(
        parts[2].as_array().unwrap().data,
        ArrayData::F32(vec![3., 4., 3., 4.])
    );

    // A scatter that assigns has no gradient rule: a clear error.
    let m = module(
        "  x = f32[3] parameter(0)\n  i = s32[1,1] parameter(1)\n  u = f32[1] parameter(2)\n  \
         s = f32[3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, \
         scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=assign\n  \
         z = f32[] constant(0)\n  ROOT l = f32[] reduce(s, z), dimensions={0}, to_apply=add",
    );
    let e = grad_module(&m, &[2]).unwrap_err();
    assert!(e.message.contains("scatter-add"), "{e}");
}

#[test]
fn text_round_trips_and_shape_errors_are_clear() {
    let m = module(
        "  t = f32[2,3] parameter(0)\n  i = s32[2,2,1] parameter(1)\n  \
         ROOT g = f32[2,2] gather(t, i), offset_dims={}, collapsed_slice_dims={1}, \
         operand_batching_dims={0}, start_indices_batching_dims={0}, start_index_map={1}, \
         index_vector_dim=2, slice_sizes={1,1}, indices_are_sorted=true",
    );
    let print = |m: &Module| print_module(m, &PrintOptions::default());
    let text = print(&m);
    assert!(
        text.contains(
            "gather(t, i), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, \
             operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, \
             slice_sizes={1,1}, indices_are_sorted=true"
        ),
        "{text}"
    );
    assert_eq!(print(&parse_module(&text, None).unwrap()), text);
    // Updates whose scatter dimension disagrees with the indices.
    let text = format!(
        "HloModule bad\n\n{REGIONS}ENTRY main {{\n  x = f32[4,2] parameter(0)\n  \
         i = s32[3] parameter(1)\n  u = f32[4,2] parameter(2)\n  \
         ROOT s = f32[4,2] scatter(x, i, u), update_window_dims={{1}}, \
         inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, \
         to_apply=add\n}}\n"
    );
    let errors =
        tessel_compiler::verifier::verify(&parse_module(&text, None).unwrap()).unwrap_err();
    let e = format!("{}", errors[0]);
    assert!(e.contains("updates f32[4,2] dimension 0 has size 4"), "{e}");
}
