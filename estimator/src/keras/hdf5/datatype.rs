//! The datatype message: the element types h5py writes (little-endian IEEE floats and
//! integers, fixed-length and variable-length strings).

use super::bytes::Reader;
use super::Hdf5File;
use crate::keras::file::KerasFileError;

#[derive(Clone, Debug, PartialEq)]
pub enum Datatype {
    /// An integer of `size` bytes.
    Int { size: u8, signed: bool },
    /// An IEEE float of 4 or 8 bytes.
    Float { size: u8 },
    /// A fixed-length string of `size` bytes (null-padded or space-padded).
    FixedString { size: u32, space_padded: bool },
    /// A variable-length string: its bytes live in a global heap.
    VarString,
}

impl Datatype {
    /// Bytes one element takes in a dataset or attribute (a variable-length string's
    /// element is its length, global heap address and object index).
    pub(crate) fn element_size(&self, file: &Hdf5File) -> u64 {
        match self {
            Datatype::Int { size, .. } | Datatype::Float { size } => u64::from(*size),
            Datatype::FixedString { size, .. } => u64::from(*size),
            Datatype::VarString => 4 + u64::from(file.sizeof_offsets) + 4,
        }
    }
}

/// Reads a datatype at `at` (within a message of `size` bytes).
pub(crate) fn read(file: &Hdf5File, at: u64) -> Result<Datatype, KerasFileError> {
    let mut r = Reader::at(file, at);
    let class_version = r.u8("the datatype class")?;
    let bits = r.bytes(3, "the datatype bit field")?;
    let (b0, b1) = (bits[0], bits[1]);
    let size = r.u32("the datatype size")?;
    let class = class_version & 0x0f;
    let big_endian = b0 & 0x01 != 0;
    match class {
        0 => {
            if big_endian {
                return Err(file.unsupported(at, "a big-endian integer type"));
            }
            if ![1, 2, 4, 8].contains(&size) {
                return Err(file.unsupported(at, format!("an integer type of {size} bytes")));
            }
            Ok(Datatype::Int {
                size: size as u8,
                signed: b0 & 0x08 != 0,
            })
        }
        1 => {
            if big_endian || b0 & 0x40 != 0 {
                return Err(file.unsupported(at, "a big-endian floating-point type"));
            }
            if size != 4 && size != 8 {
                return Err(file.unsupported(at, format!("a floating-point type of {size} bytes")));
            }
            Ok(Datatype::Float { size: size as u8 })
        }
        3 => Ok(Datatype::FixedString {
            size,
            space_padded: b0 & 0x0f == 2,
        }),
        9 => {
            if b0 & 0x0f != 1 {
                return Err(file.unsupported(at, "a variable-length sequence type"));
            }
            let _charset = b1 & 0x0f;
            Ok(Datatype::VarString)
        }
        c => Err(file.unsupported(at, format!("datatype class {}", class_name(c)))),
    }
}

fn class_name(class: u8) -> String {
    match class {
        2 => "time".into(),
        4 => "bit field".into(),
        5 => "opaque".into(),
        6 => "compound".into(),
        7 => "reference".into(),
        8 => "enumeration (h5py's bool)".into(),
        10 => "array".into(),
        c => c.to_string(),
    }
}
