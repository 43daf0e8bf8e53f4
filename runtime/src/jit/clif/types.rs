//! How element types live in memory and in CLIF values.
//!
//! Memory uses XLA's layout (`pred` is one byte 0/1). In scalar code a value has the CLIF type
//! of its element type (`pred` is `i8` 0/1); in 4-lane code `f32` is `f32x4`, `s32`/`u32` are
//! `i32x4` and `pred` is an `i32x4` mask of all-ones / all-zeros lanes.

use crate::jit::JitError;
use cranelift_codegen::ir::{types, Type};
use tessel_compiler::ir::ElementType;

/// The CLIF type of one element in scalar code.
pub(crate) fn scalar_type(ty: ElementType) -> Result<Type, JitError> {
    use ElementType::*;
    Ok(match ty {
        Pred | S8 | U8 => types::I8,
        S16 | U16 => types::I16,
        S32 | U32 => types::I32,
        S64 | U64 => types::I64,
        F32 => types::F32,
        F64 => types::F64,
        // Held widened; see the module doc.
        F16 | BF16 => types::F32,
    })
}

/// Whether `ty` is a 16-bit float held as an `f32` in CLIF.
pub(crate) fn is_low_precision(ty: ElementType) -> bool {
    matches!(ty, ElementType::F16 | ElementType::BF16)
}

/// The type arithmetic on `ty` runs in: `f32` for the 16-bit floats, else `ty` itself.
pub(crate) fn compute_type(ty: ElementType) -> ElementType {
    if is_low_precision(ty) {
        ElementType::F32
    } else {
        ty
    }
}

/// Whether 4-lane code handles this element type.
pub(crate) fn vectorizable_type(ty: ElementType) -> bool {
    matches!(
        ty,
        ElementType::F32 | ElementType::S32 | ElementType::U32 | ElementType::Pred
    )
}

/// The CLIF type of four elements in vector code.
pub(crate) fn vector_type(ty: ElementType) -> Type {
    match ty {
        ElementType::F32 => types::F32X4,
        _ => types::I32X4,
    }
}

/// The CLIF type of a value of `ty` in code of `lanes` lanes.
pub(crate) fn value_type(ty: ElementType, lanes: u32) -> Result<Type, JitError> {
    if lanes == 1 {
        scalar_type(ty)
    } else {
        Ok(vector_type(ty))
    }
}
