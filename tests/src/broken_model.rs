//! A model function with three mistakes, for the trace-error golden file
//! (`tests/golden/trace/broken_model.errors` holds line numbers of this file).

use tessel_compiler::ir::ElementType::F32;
use tessel_compiler::ir::Module;
use tessel_compiler::trace::{Dim, TraceError, Tracer};

/// A matmul with mismatched inner dimensions, an add that does not broadcast, and a
/// `one_hot` of float labels: all three are reported, each at its line.
pub fn broken_model() -> Result<Module, TraceError> {
    let mut t = Tracer::new("broken");
    let x = t.parameter("x", &[Dim::Unknown, Dim::Fixed(784)], F32);
    let w = t.parameter("w", &[748, 10], F32);
    let b = t.parameter("b", &[12], F32);
    let y = t.scope("dense", |_| x.matmul(&w) + &b);
    let z = t.scope("head", |_| x.reshape(&[-1, 28, 28]) + &b);
    let labels = t.parameter("labels", &[Dim::Unknown], F32);
    let oh = labels.one_hot(10, F32);
    t.finish(&[&y, &z, &oh])
}
