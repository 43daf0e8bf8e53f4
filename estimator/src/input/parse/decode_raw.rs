//! `tf.io.decode_raw`: a byte string reinterpreted as a 1-D array of numbers (MNIST's
//! `image_raw` is 784 u8 pixels).

use crate::input::InputError;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

/// The element type `decode_raw` produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawType {
    U8,
    F32,
    S32,
}

impl RawType {
    /// The element type of the decoded values.
    pub fn element_type(self) -> ElementType {
        match self {
            RawType::U8 => ElementType::U8,
            RawType::F32 => ElementType::F32,
            RawType::S32 => ElementType::S32,
        }
    }
}

/// `bytes` as a 1-D array of `out_type`, read little endian unless `little_endian` is false
/// (TF's default is little endian). The length must be a whole number of values.
pub fn decode_raw(
    bytes: &[u8],
    out_type: RawType,
    little_endian: bool,
) -> Result<Array, InputError> {
    let ty = out_type.element_type();
    let width = ty.byte_size();
    let err = || InputError::DecodeRaw {
        len: bytes.len(),
        element_type: match out_type {
            RawType::U8 => "u8",
            RawType::F32 => "f32",
            RawType::S32 => "s32",
        },
        width,
    };
    let data = if little_endian || width == 1 {
        ArrayData::from_le_bytes(ty, bytes).ok_or_else(err)?
    } else {
        if !bytes.len().is_multiple_of(width) {
            return Err(err());
        }
        let swapped: Vec<u8> = bytes
            .chunks_exact(width)
            .flat_map(|c| c.iter().rev().copied())
            .collect();
        ArrayData::from_le_bytes(ty, &swapped).ok_or_else(err)?
    };
    let n = data.len() as i64;
    // The shape is made from the data, so it always fits; try_new keeps the path panic-free.
    Array::try_new(ArrayShape::new(ty, &[n]), data).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_u8_f32_s32_both_endians() {
        let a = decode_raw(&[1, 2, 255], RawType::U8, true).unwrap();
        assert_eq!(a.data, ArrayData::U8(vec![1, 2, 255]));
        let f = decode_raw(&1.5f32.to_le_bytes(), RawType::F32, true).unwrap();
        assert_eq!(f.data, ArrayData::F32(vec![1.5]));
        let s = decode_raw(&(-7i32).to_be_bytes(), RawType::S32, false).unwrap();
        assert_eq!(s.data, ArrayData::S32(vec![-7]));
        assert_eq!(s.shape.dims.as_slice(), &[1]);
    }

    #[test]
    fn a_partial_value_is_an_error() {
        let e = decode_raw(&[0; 6], RawType::F32, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "decode_raw: 6 bytes is not a whole number of f32 values (4 bytes each)"
        );
    }
}
