//! Unit tests of the tracing API.

use super::*;
use crate::ir::ElementType::{F32, S32, S64};
use crate::ir::{Module, Op};
use crate::legality::instruction_text;

/// `name = shape opcode(operands)  @line op_name` for every entry instruction, in order.
fn dump(m: &Module) -> String {
    let e = m.entry();
    e.post_order()
        .into_iter()
        .map(|id| {
            let i = e.get(id);
            format!(
                "{}  @{} {}",
                instruction_text(e, id),
                i.metadata.source.as_ref().map(|s| s.line).unwrap_or(0),
                i.metadata.op_name.clone().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn scratch() {
    let mut t = Tracer::new("mlp");
    let x = t.parameter("x", &[Dim::Unknown, Dim::Fixed(4)], F32);
    let w = t.parameter("w", &[4, 3], F32);
    let b = t.parameter("b", &[3], F32);
    let labels = t.parameter("labels", &[Dim::Unknown], S64);
    let y = t.scope("dense", |_| (x.matmul(&w) + &b).relu());
    let loss = y
        .softmax_cross_entropy_with_logits(&labels.one_hot(3, F32))
        .reduce_mean(&[], false);
    let m = t.finish(&[&loss, &y.argmax(-1)]).unwrap();
    println!("{}", dump(&m));
    for c in &m.computations {
        println!("{}", c.name);
    }
    let diags = crate::legality::check_legality(&m);
    println!("{}", crate::legality::render(&diags, &m));
    let _ = (S32, Op::Tuple);
    panic!();
}
