//! The corpus modules that fail today, each with why and the error (or mismatch) it must
//! still give. Fixing one makes its check fail until its entry here is removed.

use crate::runs::{Mode, MODES};

/// One way of checking a module: forward against JAX's outputs, or its gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    pub mode: Mode,
    pub grad: bool,
}

impl Check {
    pub fn forward(mode: Mode) -> Check {
        Check { mode, grad: false }
    }

    pub fn grad(mode: Mode) -> Check {
        Check { mode, grad: true }
    }
}

pub struct Known {
    pub name: &'static str,
    /// The modes it fails in (forward checks unless `grad`).
    pub modes: &'static [Mode],
    pub grad: bool,
    /// A part of the error (or of the mismatch) it must give.
    pub error: &'static str,
    pub reason: &'static str,
}

const ALL: &[Mode] = &MODES;

pub const KNOWN: &[Known] = &[
    Known {
        name: "top_k",
        modes: ALL,
        grad: false,
        error: "topk",
        reason: "the topk opcode is unknown to the parser",
    },
    Known {
        name: "bf16_f16_casts",
        modes: &[Mode::Interpreter, Mode::InterpreterOptimized],
        grad: false,
        error: "output 0[0] = 1.6796875, JAX 1.681884765625",
        reason: "the interpreter rounds the bf16 product to bf16; XLA:CPU keeps it in f32",
    },
    Known {
        name: "bf16_f16_casts",
        modes: &[Mode::Jit, Mode::JitOptimized],
        grad: false,
        error: "the JIT does not support element type bf16",
        reason: "the JIT has no bf16",
    },
    Known {
        name: "gelu",
        modes: &[Mode::Interpreter, Mode::Jit],
        grad: true,
        error: "= NaN, JAX",
        reason: "tessel differentiates XLA's expansion of erfc, a select between two \
                 approximations; near 0 the untaken one's derivative overflows and its zero \
                 cotangent times inf is NaN (JAX differentiates erf itself)",
    },
    Known {
        name: "gelu",
        modes: &[Mode::InterpreterOptimized, Mode::JitOptimized],
        grad: true,
        error: "neither fused before it nor an input of its fusion",
        reason: "the fusion pass groups the gradient module's instructions so that one reads \
                 a value from outside its fusion that is not an input (it used to panic)",
    },
];

/// The known failure of `name` under `check`, if it has one.
pub fn failure(name: &str, check: Check) -> Option<&'static Known> {
    KNOWN
        .iter()
        .find(|k| k.name == name && k.grad == check.grad && k.modes.contains(&check.mode))
}
