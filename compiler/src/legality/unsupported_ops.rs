//! E0301: ops the device cannot run. The list lives here and only here.

use super::{Context, Finding, UNSUPPORTED_OP};
use crate::ir::{Op, UnaryOp};

/// Custom-call targets the compiler understands: the `xla.sdy` shard_map boundary markers
/// (the shard_map body itself is an ordinary `call`).
pub(crate) const KNOWN_CUSTOM_CALL_TARGETS: [&str; 3] = [
    "xla.sdy.GlobalToLocalShape",
    "xla.sdy.LocalToGlobalShape",
    crate::passes::threefry_rounds::THREEFRY_ROUNDS_TARGET,
];

/// Why the device cannot run `op`, or `None` when it can.
pub(crate) fn unsupported_reason(op: &Op) -> Option<String> {
    match op {
        Op::CustomCall { target, .. } if !KNOWN_CUSTOM_CALL_TARGETS.contains(&target.as_str()) => {
            Some(format!(
                "custom-call target `{target}` has no device implementation"
            ))
        }
        Op::Unary(u @ (UnaryOp::Real | UnaryOp::Imag)) => Some(format!(
            "`{}` works on complex numbers, which the device does not have",
            u.name()
        )),
        _ => None,
    }
}

pub(crate) fn check(cx: &Context) -> Vec<Finding> {
    cx.instructions()
        .filter_map(|(c, id)| {
            let message = unsupported_reason(&cx.module.computation(c).get(id).op)?;
            Some(Finding {
                comp: c,
                id,
                code: UNSUPPORTED_OP,
                message,
                hint: "move the op to a host call, or express it with supported ops".to_string(),
                note: None,
                origin: None,
            })
        })
        .collect()
}
