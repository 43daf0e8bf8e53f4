//! Buffer assignment: golden cases (`tests/golden/passes/buffer-assignment/`, input HLO to
//! the assignment's text), and the MNIST training step's memory against its lower bound.

use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::hlo_text::{parse_module, parse_module_file};
use tessel_compiler::ir::{ComputationId, InstrId, Module};
use tessel_compiler::passes::{
    assign_buffers, assign_buffers_with, Buffer, BufferAssignment, BufferKind, BufferNeeds,
};
use tessel_tests::golden::run_suite;
use tessel_tests::{corpus_dir, golden_dir};

#[test]
fn golden() {
    let dir = golden_dir().join("passes").join("buffer-assignment");
    run_suite(&dir, "hlo", "expected", |input| {
        let m = parse_module_file(input).unwrap();
        assign_buffers(&m).to_text()
    });
}

#[test]
fn an_elementwise_chain_runs_in_one_buffer() {
    let m = parse_module_file(&golden_dir().join("passes/buffer-assignment/in_place.hlo")).unwrap();
    let a = assign_buffers(&m);
    let temps: Vec<_> = a
        .buffers
        .iter()
        .filter(|b| b.values.iter().any(|v| v == "a"))
        .collect();
    assert_eq!(temps.len(), 1);
    assert_eq!(temps[0].values, ["a", "b", "c", "d"]);
}

#[test]
fn loop_state_stays_in_place() {
    let m =
        parse_module_file(&golden_dir().join("passes/buffer-assignment/while_state.hlo")).unwrap();
    let a = assign_buffers(&m);
    // exp's result becomes the loop state, and the body's sine writes over it.
    let state = a
        .buffers
        .iter()
        .find(|b| b.values.iter().any(|v| v == "e"))
        .unwrap();
    assert!(
        state.values.iter().any(|v| v == "x2_body"),
        "{:?}",
        state.values
    );
    assert!(
        state.values.iter().any(|v| v == "loop{1}"),
        "{:?}",
        state.values
    );
}

#[test]
fn mnist_step_memory_is_near_the_lower_bound() {
    let path = corpus_dir().unwrap().join("mnist_cnn_train_step_b128.hlo");
    let mut m = parse_module_file(&path).unwrap();
    let report = optimize(&mut m, &CompileOptions::default()).unwrap();
    let b = &report.buffers;
    eprintln!(
        "mnist b128: peak {} lower bound {} total {} (values unshared {}), kernels {} -> {}",
        b.peak_bytes,
        b.lower_bound_bytes,
        b.total_bytes,
        b.unshared_values_bytes,
        report.kernels_before,
        report.kernels_after
    );
    assert!(b.lower_bound_bytes <= b.peak_bytes);
    assert!(
        (b.peak_bytes as f64) <= 1.25 * b.lower_bound_bytes as f64,
        "peak {} vs lower bound {}",
        b.peak_bytes,
        b.lower_bound_bytes
    );
    assert!(b.peak_bytes < b.total_bytes);
    // Sharing buffers never needs more than giving every value its own.
    assert!(b.peak_bytes <= b.unshared_values_bytes);
}

/// The buffer of `a` that holds value `name`.
fn buffer(a: &BufferAssignment, name: &str) -> Buffer {
    a.buffers
        .iter()
        .find(|b| b.values.iter().any(|v| v == name))
        .unwrap_or_else(|| panic!("no buffer holds {name}"))
        .clone()
}

/// Whether two buffers share memory.
fn overlap(x: &Buffer, y: &Buffer) -> bool {
    x.offset < y.offset + y.size && y.offset < x.offset + x.size
}

/// Needs under which `c`'s value is written by `a`'s kernel (as a convolution that pools its
/// output in its epilogue writes the pool's value).
struct CWrittenByA;

impl BufferNeeds for CWrittenByA {
    fn written_at(&self, m: &Module, comp: ComputationId, id: InstrId) -> Option<InstrId> {
        let c = m.computation(comp);
        (c.get(id).name == "c").then(|| c.find("a")).flatten()
    }
}

#[test]
fn a_value_written_early_is_live_from_the_writer() {
    let text = "HloModule m\n\nENTRY e {\n  p = f32[256]{0} parameter(0)\n  \
                a = f32[256]{0} reverse(p), dimensions={0}\n  \
                b = f32[256]{0} reverse(a), dimensions={0}\n  \
                ROOT c = f32[256]{0} reverse(b), dimensions={0}\n}\n";
    let m = parse_module(text, None).unwrap();
    // As scheduled, `c` may take `a`'s memory: `a` is dead by then.
    let plain = assign_buffers(&m);
    assert!(plain.written_early.is_empty());
    assert!(overlap(&buffer(&plain, "a"), &buffer(&plain, "c")));
    // Written at `a`, `c` lives from `a`'s position and overlaps neither `a` nor `b`.
    let early = assign_buffers_with(&m, &CWrittenByA);
    let (a, b, c) = (
        buffer(&early, "a"),
        buffer(&early, "b"),
        buffer(&early, "c"),
    );
    assert_eq!(c.live_range.0, a.live_range.0);
    assert!(!overlap(&a, &c) && !overlap(&b, &c));
    let e = m.entry();
    assert_eq!(
        early.written_early.get(&(0, e.root())),
        e.find("a").as_ref()
    );
    // Naming a later instruction is ignored.
    struct AWrittenByC;
    impl BufferNeeds for AWrittenByC {
        fn written_at(&self, m: &Module, comp: ComputationId, id: InstrId) -> Option<InstrId> {
            let c = m.computation(comp);
            (c.get(id).name == "a").then(|| c.find("c")).flatten()
        }
    }
    assert!(assign_buffers_with(&m, &AWrittenByC)
        .written_early
        .is_empty());
}

/// Needs under which `c` runs beside `a` (as a convolution run on the other core while `a`
/// runs): `c`'s value is written at `a`, and both ask for scratch.
struct CBesideA;

impl BufferNeeds for CBesideA {
    fn written_at(&self, m: &Module, comp: ComputationId, id: InstrId) -> Option<InstrId> {
        CWrittenByA.written_at(m, comp, id)
    }

    fn scratch_bytes(&self, m: &Module, comp: ComputationId, id: InstrId) -> Vec<i64> {
        let name = &m.computation(comp).get(id).name;
        if name == "a" || name == "c" {
            vec![1024]
        } else {
            Vec::new()
        }
    }
}

#[test]
fn the_scratch_of_an_instruction_written_early_is_live_from_the_writer() {
    let text = "HloModule m\n\nENTRY e {\n  p = f32[256]{0} parameter(0)\n  \
                a = f32[256]{0} reverse(p), dimensions={0}\n  \
                b = f32[256]{0} reverse(a), dimensions={0}\n  \
                ROOT c = f32[256]{0} reverse(b), dimensions={0}\n}\n";
    let m = parse_module(text, None).unwrap();
    let assignment = assign_buffers_with(&m, &CBesideA);
    let buffer = |name: &str| buffer(&assignment, name);
    let (a, b, a_scratch, c_scratch) = (
        buffer("a"),
        buffer("b"),
        buffer("a.scratch0"),
        buffer("c.scratch0"),
    );
    // `c`'s scratch is live from `a`'s position to `c`'s, where `a`'s is live at `a` only.
    assert_eq!(c_scratch.live_range.0, a.live_range.0);
    assert_eq!(a_scratch.live_range, (a.live_range.0, a.live_range.0));
    assert!(c_scratch.live_range.1 > b.live_range.0);
    // So it shares memory with nothing `a` or `b` use, and neither does `c`'s value.
    for other in [&a, &b, &a_scratch] {
        assert!(!overlap(&c_scratch, other), "{:?}", other.values);
        assert!(!overlap(&buffer("c"), other), "{:?}", other.values);
    }
}

/// Needs under which `a` writes 100 bytes besides its value for `reader` to read (as a
/// max-pool writes its window choices for its gradient).
struct ASideFor(&'static str);

impl BufferNeeds for ASideFor {
    fn side_output(&self, m: &Module, comp: ComputationId, id: InstrId) -> Option<(i64, InstrId)> {
        let c = m.computation(comp);
        (c.get(id).name == "a").then(|| c.find(self.0).map(|r| (100, r)))?
    }
}

#[test]
fn a_side_output_lives_from_its_writer_to_its_reader() {
    let text = "HloModule m\n\nENTRY e {\n  p = f32[256]{0} parameter(0)\n  \
                a = f32[256]{0} reverse(p), dimensions={0}\n  \
                b = f32[256]{0} reverse(a), dimensions={0}\n  \
                ROOT c = f32[256]{0} reverse(b), dimensions={0}\n}\n";
    let m = parse_module(text, None).unwrap();
    let assignment = assign_buffers_with(&m, &ASideFor("c"));
    let buffer = |name: &str| buffer(&assignment, name);
    let (a, b, c, side) = (buffer("a"), buffer("b"), buffer("c"), buffer("a.side"));
    assert_eq!(side.kind, BufferKind::Side);
    assert_eq!(side.size, 100);
    // Live from `a` to `c`, so it shares memory with none of the three values.
    assert_eq!(side.live_range, (a.live_range.0, c.live_range.0));
    for other in [&a, &b, &c] {
        assert!(!overlap(&side, other), "{:?}", other.values);
    }
    let e = m.entry();
    let (a_id, c_id) = (e.find("a").unwrap(), e.find("c").unwrap());
    let &(reader, buffer_index) = assignment.side_outputs.get(&(0, a_id)).unwrap();
    assert_eq!(reader, c_id);
    assert_eq!(assignment.buffers[buffer_index].values, ["a.side"]);
    assert!(assignment.to_text().contains("kind=side values: a.side"));
    // A reader that comes first, or the writer itself, gets no side buffer.
    for early in ["p", "a"] {
        let none = assign_buffers_with(&m, &ASideFor(early));
        assert!(none.side_outputs.is_empty(), "reader {early}");
        assert!(none.buffers.iter().all(|b| b.kind != BufferKind::Side));
    }
}

/// Needs whose entry parameters are the program's to overwrite (as the JIT's are).
struct DonatedParameters;

impl BufferNeeds for DonatedParameters {
    fn parameters_donated(&self) -> bool {
        true
    }
}

/// A loop over the entry's parameters: `w` is read only by the loop, `v` also after it.
const LOOP_OVER_PARAMETERS: &str = r#"
HloModule loop_over_parameters

body {
  p_body = (s32[], f32[64], f32[64]) parameter(0)
  i_body = s32[] get-tuple-element(p_body), index=0
  one_body = s32[] constant(1)
  i2_body = s32[] add(i_body, one_body)
  w_body = f32[64] get-tuple-element(p_body), index=1
  w2_body = f32[64] sine(w_body)
  v_body = f32[64] get-tuple-element(p_body), index=2
  v2_body = f32[64] cosine(v_body)
  ROOT t_body = (s32[], f32[64], f32[64]) tuple(i2_body, w2_body, v2_body)
}

cond {
  p_cond = (s32[], f32[64], f32[64]) parameter(0)
  i_cond = s32[] get-tuple-element(p_cond), index=0
  n_cond = s32[] constant(3)
  ROOT lt_cond = pred[] compare(i_cond, n_cond), direction=LT
}

ENTRY main {
  w = f32[64] parameter(0)
  v = f32[64] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[64], f32[64]) tuple(zero, w, v)
  loop = (s32[], f32[64], f32[64]) while(init), condition=cond, body=body
  w_out = f32[64] get-tuple-element(loop), index=1
  v_out = f32[64] get-tuple-element(loop), index=2
  v_again = f32[64] add(v_out, v)
  ROOT out = (f32[64], f32[64]) tuple(w_out, v_again)
}
"#;

/// With donated parameters the loop's state takes over a parameter's buffer when nothing
/// after the loop reads it, and the body writes over it there; one read after the loop keeps
/// its own buffer. Without donation (the report's needs) no parameter is taken over.
#[test]
fn loop_state_takes_over_a_donated_parameter_read_by_nothing_after_it() {
    let m = parse_module(LOOP_OVER_PARAMETERS, None).unwrap();
    let a = assign_buffers_with(&m, &DonatedParameters);
    let w = buffer(&a, "w");
    assert_eq!(w.kind, BufferKind::Parameter);
    for v in ["loop{1}", "w2_body"] {
        assert!(w.values.iter().any(|x| x == v), "{:?}", w.values);
    }
    let v = buffer(&a, "v");
    assert_eq!(v.values, ["v"]);
    assert!(!overlap(&v, &buffer(&a, "loop{2}")));

    let report = assign_buffers(&m);
    for p in ["w", "v"] {
        assert_eq!(buffer(&report, p).values, [p]);
    }
    assert!(a.peak_bytes < report.peak_bytes);
}
