//! The JIT's `while` writes body results straight into the loop state only when that is
//! safe. Each body here reads the old state in a way that forbids it for some element (at
//! other indices, after another element's update, swapped), and must still give the
//! interpreter's numbers.

use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, Literal};
use tessel_runtime::jit::{compile, JitOptions};

/// A 5-iteration loop over (i, a, b) whose body computes `a2` and `b2` from `body_lines`.
fn looped(body_lines: &str) -> String {
    format!(
        r#"HloModule hazards

add_f32 {{
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}}

cond {{
  cp = (s32[], f32[8], f32[8]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  ck = s32[] constant(5)
  ROOT lt = pred[] compare(ci, ck), direction=LT
}}

body {{
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  a = f32[8] get-tuple-element(p), index=1
  b = f32[8] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
{body_lines}
  ROOT t = (s32[], f32[8], f32[8]) tuple(i2, a2, b2)
}}

ENTRY main {{
  a0 = f32[8] parameter(0)
  b0 = f32[8] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[8], f32[8]) tuple(zero, a0, b0)
  w = (s32[], f32[8], f32[8]) while(init), condition=cond, body=body
  ra = f32[8] get-tuple-element(w), index=1
  rb = f32[8] get-tuple-element(w), index=2
  ROOT r = (f32[8], f32[8]) tuple(ra, rb)
}}
"#
    )
}

fn check(body_lines: &str) {
    let m = parse_module(&looped(body_lines), None).unwrap();
    let args = [
        Literal::Array(Array::f32(
            &[8],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        )),
        Literal::Array(Array::f32(
            &[8],
            vec![0.5, -1.0, 2.0, 0.25, 3.0, -2.0, 1.5, 1.0],
        )),
    ];
    let want = evaluate(&m, &args).unwrap();
    let got = compile(&m, &JitOptions::default())
        .unwrap()
        .run(&args)
        .unwrap();
    assert_eq!(got, want, "body:\n{body_lines}");
}

#[test]
fn a_new_value_reading_the_old_one_at_other_indices() {
    // a2 reads a reversed: writing it over a while reading would see new values.
    check("  ra = f32[8] reverse(a), dimensions={0}\n  a2 = f32[8] add(ra, b)\n  b2 = f32[8] multiply(b, b)");
}

#[test]
fn an_old_value_read_after_another_elements_update() {
    // b2 reads the old a, and is computed after a2.
    check("  a2 = f32[8] add(a, b)\n  b2 = f32[8] multiply(a, a2)");
}

#[test]
fn a_swap_and_a_rotation() {
    check("  a2 = f32[8] copy(b)\n  b2 = f32[8] copy(a)");
    check(
        "  s1 = f32[7] slice(a), slice={[1:8]}\n  s0 = f32[1] slice(a), slice={[0:1]}\n  a2 = f32[8] concatenate(s1, s0), dimensions={0}\n  b2 = f32[8] add(b, a2)",
    );
}

#[test]
fn a_new_value_reading_a_reduction_of_the_old_one() {
    check(
        "  z = f32[] constant(0)\n  sa = f32[] reduce(a, z), dimensions={0}, to_apply=add_f32\n  bs = f32[8] broadcast(sa), dimensions={}\n  a2 = f32[8] subtract(a, bs)\n  b2 = f32[8] multiply(b, a)",
    );
}

#[test]
fn in_place_updates_of_both_elements() {
    check("  two = f32[] constant(2)\n  tb = f32[8] broadcast(two), dimensions={}\n  a2 = f32[8] multiply(a, tb)\n  b2 = f32[8] subtract(b, tb)");
}
