//! Decoding the raw bytes of a dataset or attribute into numbers or strings.

use super::datatype::Datatype;
use super::global_heap;
use super::Hdf5File;
use crate::keras::file::KerasFileError;

/// Numbers as f64 (every integer and float h5py writes fits a float's meaning here).
pub(crate) fn numbers(
    file: &Hdf5File,
    at: u64,
    bytes: &[u8],
    dtype: &Datatype,
) -> Result<Vec<f64>, KerasFileError> {
    Ok(match *dtype {
        Datatype::Float { size: 4 } => bytes
            .chunks_exact(4)
            .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
        Datatype::Float { .. } => bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            .collect(),
        Datatype::Int { size, signed } => {
            let n = usize::from(size);
            bytes
                .chunks_exact(n)
                .map(|b| {
                    let v = super::bytes::le_uint(b);
                    if signed && n < 8 && v >> (8 * n - 1) & 1 == 1 {
                        (v as i64 - (1i64 << (8 * n))) as f64
                    } else if signed {
                        v as i64 as f64
                    } else {
                        v as f64
                    }
                })
                .collect()
        }
        _ => return Err(file.not_kind(at, "numbers", dtype)),
    })
}

/// Strings, fixed-length (padding stripped) or variable-length (read from the global heap).
pub(crate) fn strings(
    file: &Hdf5File,
    at: u64,
    bytes: &[u8],
    dtype: &Datatype,
) -> Result<Vec<String>, KerasFileError> {
    if bytes.is_empty() {
        // h5py writes an empty list as an empty float64 array.
        return Ok(Vec::new());
    }
    let size = dtype.element_size(file) as usize;
    let raw: Vec<Vec<u8>> = match dtype {
        Datatype::FixedString { .. } if size == 0 => Vec::new(),
        Datatype::FixedString { space_padded, .. } => bytes
            .chunks_exact(size)
            .map(|b| {
                let pad = if *space_padded { b' ' } else { 0 };
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                let s = &b[..end];
                let kept = s.len() - s.iter().rev().take_while(|&&c| c == pad).count();
                s[..kept].to_vec()
            })
            .collect(),
        Datatype::VarString => bytes
            .chunks_exact(size)
            .map(|b| global_heap::vlen_bytes(file, b))
            .collect::<Result<_, _>>()?,
        _ => return Err(file.not_kind(at, "strings", dtype)),
    };
    raw.into_iter()
        .map(|b| String::from_utf8(b).map_err(|_| file.corrupt(at, "a string in UTF-8 or ASCII")))
        .collect()
}
