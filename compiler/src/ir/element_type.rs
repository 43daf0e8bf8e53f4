//! Element types of array values, with HLO's spellings.

use std::fmt;

/// The element type of an array. 64-bit types exist so that they can be represented and
/// rejected by the device-legality check with a precise diagnostic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElementType {
    Pred,
    S8,
    U8,
    S16,
    U16,
    S32,
    U32,
    S64,
    U64,
    F16,
    BF16,
    F32,
    F64,
}

impl ElementType {
    pub const ALL: [ElementType; 13] = [
        ElementType::Pred,
        ElementType::S8,
        ElementType::U8,
        ElementType::S16,
        ElementType::U16,
        ElementType::S32,
        ElementType::U32,
        ElementType::S64,
        ElementType::U64,
        ElementType::F16,
        ElementType::BF16,
        ElementType::F32,
        ElementType::F64,
    ];

    /// HLO's spelling: `pred`, `s32`, `f32`, ...
    pub fn name(self) -> &'static str {
        use ElementType::*;
        match self {
            Pred => "pred",
            S8 => "s8",
            U8 => "u8",
            S16 => "s16",
            U16 => "u16",
            S32 => "s32",
            U32 => "u32",
            S64 => "s64",
            U64 => "u64",
            F16 => "f16",
            BF16 => "bf16",
            F32 => "f32",
            F64 => "f64",
        }
    }

    pub fn from_name(s: &str) -> Option<ElementType> {
        ElementType::ALL.iter().copied().find(|t| t.name() == s)
    }

    /// Size of one element in bytes (`pred` takes one byte, as in XLA).
    pub fn byte_size(self) -> usize {
        use ElementType::*;
        match self {
            Pred | S8 | U8 => 1,
            S16 | U16 | F16 | BF16 => 2,
            S32 | U32 | F32 => 4,
            S64 | U64 | F64 => 8,
        }
    }

    pub(crate) fn bit_width(self) -> usize {
        self.byte_size() * 8
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            ElementType::F16 | ElementType::BF16 | ElementType::F32 | ElementType::F64
        )
    }

    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            ElementType::S8 | ElementType::S16 | ElementType::S32 | ElementType::S64
        )
    }

    pub(crate) fn is_unsigned_int(self) -> bool {
        matches!(
            self,
            ElementType::U8 | ElementType::U16 | ElementType::U32 | ElementType::U64
        )
    }

    pub fn is_integer(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    pub(crate) fn is_pred(self) -> bool {
        self == ElementType::Pred
    }

    /// Whether a TPU-like device can hold values of this type (no 64-bit types).
    pub(crate) fn is_64_bit(self) -> bool {
        self.byte_size() == 8
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
