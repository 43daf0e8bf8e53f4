//! Unit tests of the tracing API.

use super::*;
use crate::ir::ElementType::{F32, S32, S64};
use crate::ir::{BinaryOp, InstrId, Module, Op};

fn entry_instr<'m>(m: &'m Module, name_prefix: &str) -> Vec<&'m crate::ir::Instruction> {
    let e = m.entry();
    e.post_order()
        .into_iter()
        .map(|id| e.get(id))
        .filter(|i| i.name.starts_with(name_prefix))
        .collect()
}

fn dims_text(m: &Module, id: InstrId) -> String {
    m.entry().get(id).shape.to_text(false)
}

#[test]
fn ops_record_scope_and_caller_line() {
    let mut t = Tracer::new("linear");
    let x = t.parameter("x", &[Dim::Unknown, Dim::Fixed(4)], F32);
    let w = t.parameter("w", &[4, 3], F32);
    let line = line!() + 1;
    let y = t.scope("dense", |t| t.scope("inner", |_| x.matmul(&w)));
    let m = t.finish(&[&y]).unwrap();
    let dot = entry_instr(&m, "dot")[0];
    assert_eq!(dot.metadata.op_name.as_deref(), Some("dense/inner/dot"));
    let src = dot.metadata.source.as_ref().unwrap();
    assert!(src.file.ends_with("trace/tests.rs"), "{}", src.file);
    assert_eq!(src.line, line);
    assert_eq!(dims_text(&m, m.entry().root()), "f32[?,3]");
    let x = entry_instr(&m, "x.")[0];
    assert_eq!(x.metadata.op_name.as_deref(), Some("x"));
    assert_eq!(x.metadata.source.as_ref().unwrap().line, line - 3);
}

#[test]
fn shape_errors_are_collected_with_both_shapes_and_lines() {
    let mut t = Tracer::new("bad");
    let a = t.parameter("a", &[2, 3], F32);
    let b = t.parameter("b", &[4, 5], F32);
    let first = line!() + 1;
    let p = a.matmul(&b);
    let q = &p + 1.0; // failed operand: no second error
    let second = line!() + 1;
    let r = &a + &b;
    assert!(!p.is_ok() && !q.is_ok() && !r.is_ok());
    assert!(p.shape().is_none() && p.dims().is_empty());
    let err = t.finish(&[&a]).unwrap_err();
    assert_eq!(err.issues.len(), 2, "{err}");
    assert_eq!(err.issues[0].op, "matmul");
    assert!(err.issues[0].message.contains("f32[2,3]"));
    assert!(err.issues[0].message.contains("f32[4,5]"));
    assert_eq!(err.issues[0].location.line, first);
    assert_eq!(err.issues[1].location.line, second);
    assert!(err.issues[1].message.contains("do not broadcast"));
    let text = err.to_string();
    assert!(
        text.contains("tracing `bad` failed with 2 errors"),
        "{text}"
    );
    assert!(text.contains(&format!("trace/tests.rs:{first}:")), "{text}");
}

#[test]
fn numpy_broadcasting_inserts_explicit_broadcasts() {
    let mut t = Tracer::new("bcast");
    let x = t.parameter("x", &[2, 3], F32);
    let b = t.parameter("b", &[3], F32);
    let c = t.parameter("c", &[2, 1], F32);
    let y = &x + &b;
    let z = &c * &b;
    let m = t.finish(&[&y, &z]).unwrap();
    let e = m.entry();
    let add = entry_instr(&m, "add")[0];
    let bc = e.get(add.operands()[1]);
    assert_eq!(
        bc.op,
        Op::Broadcast {
            dimensions: vec![1]
        }
    );
    assert_eq!(bc.shape.to_text(false), "f32[2,3]");
    // [2,1] * [3]: the size-1 dimension is reshaped away, then broadcast.
    let mul = entry_instr(&m, "multiply")[0];
    assert_eq!(mul.shape.to_text(false), "f32[2,3]");
    let lhs = e.get(mul.operands()[0]);
    assert_eq!(
        lhs.op,
        Op::Broadcast {
            dimensions: vec![0]
        }
    );
    assert_eq!(e.get(lhs.operands()[0]).op, Op::Reshape);
    assert_eq!(e.get(lhs.operands()[0]).shape.to_text(false), "f32[2]");
}

#[test]
fn scalars_work_on_either_side_of_operators() {
    let mut t = Tracer::new("scalars");
    let x = t.parameter("x", &[3], F32);
    let line = line!() + 1;
    let y = 2.0 - &x;
    let z = -(y / 4.0) * x.clone() + 1.0;
    let m = t.finish(&[&z]).unwrap();
    let e = m.entry();
    let sub = entry_instr(&m, "subtract")[0];
    assert_eq!(sub.op, Op::Binary(BinaryOp::Subtract));
    // The constant is the left operand: 2 - x.
    assert_eq!(
        e.get(e.get(sub.operands()[0]).operands()[0])
            .name
            .split('.')
            .next(),
        Some("constant")
    );
    assert_eq!(e.get(sub.operands()[1]).name, "x.1");
    assert_eq!(sub.metadata.source.as_ref().unwrap().line, line);
    let neg = entry_instr(&m, "negate");
    assert_eq!(neg.len(), 1);
    assert_eq!(neg[0].metadata.source.as_ref().unwrap().line, line + 1);
    assert_eq!(entry_instr(&m, "divide").len(), 1);
    assert_eq!(dims_text(&m, e.root()), "f32[3]");
}

#[test]
fn reshape_infers_one_minus_one() {
    let mut t = Tracer::new("reshape");
    let x = t.parameter("x", &[Dim::Unknown, Dim::Fixed(784)], F32);
    let y = t.parameter("y", &[6, 4], F32);
    let a = x.reshape(&[-1, 28, 28, 1]);
    let b = y.reshape(&[-1, 8]);
    assert_eq!(
        a.dims(),
        vec![Dim::Unknown, Dim::Fixed(28), Dim::Fixed(28), Dim::Fixed(1)]
    );
    assert_eq!(b.dims(), vec![Dim::Fixed(3), Dim::Fixed(8)]);
    assert!(!y.reshape(&[-1, -1]).is_ok());
    assert!(!y.reshape(&[5, -1]).is_ok());
    assert!(!y.reshape(&[4, 5]).is_ok());
    let err = t.finish(&[&a, &b]).unwrap_err();
    assert_eq!(err.issues.len(), 3);
    assert!(
        err.issues[2].message.contains("f32[6,4]"),
        "{}",
        err.issues[2].message
    );
}

#[test]
fn cnn_layers_have_tensorflow_shapes() {
    let mut t = Tracer::new("cnn");
    let x = t.parameter("x", &[8, 28, 28, 1], F32);
    let k = t.parameter("k", &[5, 5, 1, 32], F32);
    let c = x.conv2d(&k, [1, 1], Padding::Same).relu();
    let p = c.max_pool([2, 2], [2, 2], Padding::Same);
    let v = x.conv2d(&k, [2, 2], Padding::Valid);
    assert_eq!(c.dims(), vec![8, 28, 28, 32].into_dims());
    assert_eq!(p.dims(), vec![8, 14, 14, 32].into_dims());
    assert_eq!(v.dims(), vec![8, 12, 12, 32].into_dims());
    let bad = x.conv2d(
        &t.parameter("k2", &[5, 5, 3, 32], F32),
        [1, 1],
        Padding::Same,
    );
    assert!(!bad.is_ok());
    let err = t.finish(&[&p]).unwrap_err();
    assert!(err.issues[0].message.contains("f32[5,5,3,32]"));
    assert!(err.issues[0].message.contains("f32[8,28,28,1]"));
}

#[test]
fn conv_and_pool_attributes() {
    let mut t = Tracer::new("cnn");
    let x = t.parameter("x", &[2, 7, 7, 3], F32);
    let k = t.parameter("k", &[3, 3, 3, 4], F32);
    let y = x
        .conv2d(&k, [2, 2], Padding::Same)
        .max_pool([2, 2], [2, 2], Padding::Same);
    let m = t.finish(&[&y]).unwrap();
    let conv = entry_instr(&m, "convolution")[0];
    let Op::Convolution(c) = &conv.op else {
        panic!()
    };
    assert_eq!((c.dims.input_feature, c.dims.kernel_output_feature), (3, 3));
    assert_eq!(c.window.dims[0].stride, 2);
    assert_eq!(
        (c.window.dims[0].pad_low, c.window.dims[0].pad_high),
        (1, 1)
    );
    assert_eq!(conv.shape.to_text(false), "f32[2,4,4,4]");
    let rw = entry_instr(&m, "reduce-window")[0];
    let Op::ReduceWindow { window, to_apply } = &rw.op else {
        panic!()
    };
    assert_eq!(window.dims.len(), 4);
    assert_eq!(window.dims[1].size, 2);
    assert!(m.computation(*to_apply).name.starts_with("max_f32"));
    assert_eq!(rw.shape.to_text(false), "f32[2,2,2,4]");
}

#[test]
fn finish_puts_regions_first_and_tuples_outputs() {
    let mut t = Tracer::new("sums");
    let x = t.parameter("x", &[4, 5], F32);
    let s = x.reduce_sum(&[1], false);
    let mx = x.reduce_max(&[-1], true);
    let i = x.argmax(1);
    let m = t.finish(&[&s, &mx, &i]).unwrap();
    assert_eq!(m.entry.0 as usize, m.computations.len() - 1);
    assert_eq!(m.entry().name, "main.sums");
    let names: Vec<&str> = m.computations.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    let root = m.entry().get(m.entry().root());
    assert_eq!(root.op, Op::Tuple);
    assert_eq!(root.shape.to_text(false), "(f32[4], f32[4,1], s32[4])");
    for instr in entry_instr(&m, "reduce") {
        if let Op::Reduce { to_apply, .. } = instr.op {
            let region = m.computation(to_apply);
            assert!(!region.is_empty());
            let want = if instr.shape.is_tuple() {
                "argmax_f32_s32"
            } else {
                ""
            };
            assert!(region.name.starts_with(want));
        }
    }
}

#[test]
fn one_hot_and_casts_keep_64_bit_types() {
    let mut t = Tracer::new("labels");
    let labels = t.parameter("labels", &[Dim::Unknown], S64);
    let oh = labels.one_hot(10, F32);
    assert_eq!(oh.dims(), vec![Dim::Unknown, Dim::Fixed(10)]);
    assert_eq!(oh.element_type(), Some(F32));
    let l32 = labels.cast(S32);
    assert_eq!(l32.element_type(), Some(S32));
    let bad = oh.one_hot(3, F32);
    assert!(!bad.is_ok());
    let err = t.finish(&[&oh]).unwrap_err();
    assert!(err.issues[0].message.contains("integer labels"));
}

#[test]
fn mean_over_an_unknown_batch_counts_at_run_time() {
    let mut t = Tracer::new("mean");
    let x = t.parameter("x", &[Dim::Unknown, Dim::Fixed(3)], F32);
    let fixed = x.reduce_mean(&[1], false);
    let whole = x.reduce_mean(&[], false);
    let m = t.finish(&[&fixed, &whole]).unwrap();
    let e = m.entry();
    let divides = entry_instr(&m, "divide");
    assert_eq!(divides.len(), 2);
    // Over the fixed axis the divisor is a constant (broadcast); over the batch it is a sum.
    let d0 = e.get(divides[0].operands()[1]);
    assert!(matches!(d0.op, Op::Broadcast { .. }));
    let d1 = e.get(divides[1].operands()[1]);
    assert!(matches!(d1.op, Op::Reduce { .. }));
    assert_eq!(
        divides[1].metadata.op_name.as_deref(),
        Some("reduce_mean/divide")
    );
}

#[test]
fn softmax_ops_are_scoped_and_checked() {
    let mut t = Tracer::new("softmax");
    let x = t.parameter("x", &[2, 5], F32);
    let labels = t.parameter("y", &[2, 5], F32);
    let p = t.scope("head", |_| x.softmax(-1));
    let xent = x.softmax_cross_entropy_with_logits(&labels);
    assert_eq!(xent.dims(), vec![Dim::Fixed(2)]);
    assert_eq!(x.log_softmax(1).dims(), x.dims());
    let bad = x.softmax_cross_entropy_with_logits(&t.parameter("z", &[2, 4], F32));
    assert!(!bad.is_ok());
    let ints = t.parameter("i", &[2], S32);
    assert!(!ints.exp().is_ok());
    let err = t.finish(&[&p, &xent]).unwrap_err();
    assert_eq!(err.issues.len(), 2);
    assert!(err.issues[1].message.contains("s32[2]"));
    let mut t = Tracer::new("softmax");
    let x = t.parameter("x", &[2, 5], F32);
    let p = t.scope("head", |_| x.softmax(-1));
    let m = t.finish(&[&p]).unwrap();
    let exp = entry_instr(&m, "exponential")[0];
    assert_eq!(
        exp.metadata.op_name.as_deref(),
        Some("head/softmax/exponential")
    );
}

#[test]
fn shape_ops_slice_concat_transpose_where() {
    let mut t = Tracer::new("shapes");
    let x = t.parameter("x", &[4, 6], F32);
    let s = x.slice(&[1, 0], &[3, 6]);
    let c = s.concat(&[&x], 0);
    let tr = c.transpose(&[1, 0]);
    let w = tr
        .greater(&tr.scalar_like(0.0))
        .where_(&tr, &tr.scalar_like(1.0));
    assert_eq!(s.dims(), vec![2, 6].into_dims());
    assert_eq!(c.dims(), vec![6, 6].into_dims());
    assert_eq!(w.dims(), vec![6, 6].into_dims());
    assert!(!x.slice(&[0, 0], &[5, 6]).is_ok());
    assert!(!x.transpose(&[0, 0]).is_ok());
    assert!(!x.concat(&[&t.parameter("y", &[4, 5], F32)], 0).is_ok());
    assert_eq!(t.issues().len(), 3);
}

#[test]
fn dropout_scales_kept_elements() {
    let mut t = Tracer::new("dropout");
    let x = t.parameter("x", &[2, 3], F32);
    let noise = t.parameter("noise", &[2, 3], F32);
    let y = x.dropout(&noise, 0.4);
    assert_eq!(y.dims(), x.dims());
    assert!(!x.dropout(&noise, 1.0).is_ok());
    let m = t.finish(&[&y]).unwrap_err();
    assert!(m.issues[0].message.contains("[0, 1)"));
}

#[test]
fn tensors_of_another_trace_are_rejected() {
    let mut a = Tracer::new("a");
    let mut b = Tracer::new("b");
    let x = a.parameter("x", &[2], F32);
    let y = b.parameter("y", &[2], F32);
    let z = &x + &y;
    assert!(!z.is_ok());
    assert!(a.finish(&[&x]).unwrap_err().issues[0]
        .message
        .contains("different tracer"));
    assert!(b.finish(&[&x]).unwrap_err().issues[0]
        .message
        .contains("different tracer"));
}

#[test]
fn tensor_from_instruction_for_extensions() {
    let mut t = Tracer::new("ext");
    let x = t.parameter("x", &[2], F32);
    let id = t.with_module(|m, entry| {
        let comp = m.computation(entry);
        comp.parameters()[0]
    });
    let again = t.tensor(id);
    let y = &again + &x;
    let m = t.finish(&[&y]).unwrap();
    assert_eq!(m.entry().get(m.entry().root()).operands().len(), 2);
}

#[test]
fn constants_scalars_and_fills() {
    use crate::ir::{Array, Literal};
    let mut t = Tracer::new("consts");
    let c = t.constant(Array::f32(&[2], vec![1.0, 2.0]));
    let s = t.scalar(3.0, S32);
    let f = t.full(&[Dim::Fixed(2), Dim::Fixed(3)], 0.5, F32);
    assert_eq!(c.dims(), vec![Dim::Fixed(2)]);
    assert_eq!(s.element_type(), Some(S32));
    assert_eq!(f.dims(), vec![2, 3].into_dims());
    let bad = t.parameter("p", &[-2], F32);
    assert!(!bad.is_ok());
    assert_eq!(t.issues().len(), 1);
    let mut t = Tracer::new("consts");
    let c = t.constant(Array::f32(&[2], vec![1.0, 2.0]));
    let m = t.finish(&[&c]).unwrap();
    let root = m.entry().get(m.entry().root());
    assert_eq!(
        root.op,
        Op::Constant(Literal::Array(Array::f32(&[2], vec![1.0, 2.0])))
    );
    assert!(t_finish_without_outputs_fails());
}

fn t_finish_without_outputs_fails() -> bool {
    let t = Tracer::new("empty");
    t.finish(&[]).is_err()
}
