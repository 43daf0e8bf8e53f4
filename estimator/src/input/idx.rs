//! IDX files (MNIST's original format, plain or `.gz`): a 4-byte magic (two zero bytes, a type
//! code, the number of dimensions), one big-endian u32 per dimension, then the values,
//! big-endian, row-major. Read into an [`Array`] of the same shape.

use crate::input::InputError;
use flate2::read::MultiGzDecoder;
use std::io::Read;
use std::path::Path;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

/// Reads an IDX file, gzip-compressed or not (told apart by the gzip magic, not the name).
pub fn read_idx(path: impl AsRef<Path>) -> Result<Array, InputError> {
    let path = path.as_ref();
    let raw = std::fs::read(path).map_err(|e| InputError::io(path, e))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| InputError::Idx {
                path: path.to_path_buf(),
                reason: format!("a broken gzip stream: {e}"),
            })?;
        out
    } else {
        raw
    };
    parse_idx(&bytes).map_err(|reason| InputError::Idx {
        path: path.to_path_buf(),
        reason,
    })
}

/// Parses the bytes of an (uncompressed) IDX file.
pub(crate) fn parse_idx(bytes: &[u8]) -> Result<Array, String> {
    if bytes.len() < 4 {
        return Err(format!(
            "{} bytes, shorter than the 4-byte magic",
            bytes.len()
        ));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(format!(
            "the magic starts {:02x} {:02x}, not 00 00",
            bytes[0], bytes[1]
        ));
    }
    let ty = match bytes[2] {
        0x08 => ElementType::U8,
        0x09 => ElementType::S8,
        0x0b => ElementType::S16,
        0x0c => ElementType::S32,
        0x0d => ElementType::F32,
        0x0e => ElementType::F64,
        other => return Err(format!("unknown type code 0x{other:02x}")),
    };
    let rank = bytes[3] as usize;
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err(format!(
            "{} bytes, shorter than the header of {rank} dimensions ({header} bytes)",
            bytes.len()
        ));
    }
    let dims: Vec<i64> = bytes[4..header]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap()) as i64)
        .collect();
    let width = ty.byte_size();
    let expected = dims
        .iter()
        .try_fold(width as u64, |acc, &d| acc.checked_mul(d as u64))
        .and_then(|n| n.checked_add(header as u64));
    if expected != Some(bytes.len() as u64) {
        return Err(format!(
            "dimensions {dims:?} of {width}-byte values need {} bytes, the file has {}",
            expected.map_or("more than 2^64".to_string(), |n| n.to_string()),
            bytes.len()
        ));
    }
    // Big-endian values: swap to little endian for ArrayData.
    let body = &bytes[header..];
    let data = if width == 1 {
        ArrayData::from_le_bytes(ty, body)
    } else {
        let le: Vec<u8> = body
            .chunks_exact(width)
            .flat_map(|c| c.iter().rev().copied())
            .collect();
        ArrayData::from_le_bytes(ty, &le)
    }
    .ok_or_else(|| {
        format!(
            "{} bytes of values are not whole {width}-byte values",
            body.len()
        )
    })?;
    Array::try_new(ArrayShape::new(ty, &dims), data).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn idx_u8(dims: &[u32], values: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, 0x08, dims.len() as u8];
        for d in dims {
            b.extend(d.to_be_bytes());
        }
        b.extend(values);
        b
    }

    #[test]
    fn reads_plain_and_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = idx_u8(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let plain = dir.path().join("x-idx3-ubyte");
        std::fs::write(&plain, &bytes).unwrap();
        let gz = dir.path().join("x-idx3-ubyte.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&bytes).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        for p in [plain, gz] {
            let a = read_idx(&p).unwrap();
            assert_eq!(a.shape.dims.as_slice(), &[2, 3]);
            assert_eq!(a.data, ArrayData::U8(vec![1, 2, 3, 4, 5, 6]));
        }
    }

    #[test]
    fn reads_big_endian_s32() {
        let mut b = vec![0, 0, 0x0c, 1, 0, 0, 0, 2];
        b.extend((-2i32).to_be_bytes());
        b.extend(70000i32.to_be_bytes());
        assert_eq!(parse_idx(&b).unwrap().data, ArrayData::S32(vec![-2, 70000]));
    }

    #[test]
    fn bad_files_are_clear_errors() {
        assert_eq!(
            parse_idx(&[0x50, 0x4b, 3, 4]).unwrap_err(),
            "the magic starts 50 4b, not 00 00"
        );
        assert_eq!(
            parse_idx(&[0, 0, 0x07, 1]).unwrap_err(),
            "unknown type code 0x07"
        );
        assert_eq!(
            parse_idx(&idx_u8(&[2, 3], &[1, 2, 3, 4, 5])).unwrap_err(),
            "dimensions [2, 3] of 1-byte values need 18 bytes, the file has 17"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("short");
        std::fs::write(&p, [0, 0]).unwrap();
        assert_eq!(
            read_idx(&p).unwrap_err().to_string(),
            format!(
                "{}: not an IDX file: 2 bytes, shorter than the 4-byte magic",
                p.display()
            )
        );
    }
}
