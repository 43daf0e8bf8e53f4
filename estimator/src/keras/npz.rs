//! NumPy's `.npy` arrays and `.npz` archives (a zip of `.npy` files, stored or deflated, as
//! `np.savez` / `np.savez_compressed` write them): little-endian f4, f8, i4, i8, u1 and bool.
//! The device is 32-bit, so f8 becomes f32 and i8 becomes s32, each with a range check.

use flate2::read::DeflateDecoder;
use std::io::Read;
use std::path::Path;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct NpzError {
    pub file: String,
    pub message: String,
}

fn err(file: &str, message: impl Into<String>) -> NpzError {
    NpzError {
        file: file.to_string(),
        message: message.into(),
    }
}

/// Every array of an `.npz` file, by name (without `.npy`), in the archive's order.
pub fn read_npz(path: &Path) -> Result<Vec<(String, Array)>, NpzError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| err(&file, format!("cannot read: {e}")))?;
    parse_npz(&bytes, &file)
}

/// One `.npy` file.
pub fn read_npy(path: &Path) -> Result<Array, NpzError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| err(&file, format!("cannot read: {e}")))?;
    parse_npy(&bytes).map_err(|m| err(&file, m))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The archive's members from its central directory.
pub fn parse_npz(bytes: &[u8], file: &str) -> Result<Vec<(String, Array)>, NpzError> {
    // The end-of-central-directory record: signature 0x06054b50 within the last 64 KiB + 22.
    let floor = bytes.len().saturating_sub(22 + 65535);
    let eocd = (floor..bytes.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(bytes, i) == Some(0x0605_4b50))
        .ok_or_else(|| err(file, "not a zip archive (no end of central directory record): an .npz file is what np.savez writes"))?;
    let count = u16_at(bytes, eocd + 10).unwrap_or(0) as usize;
    let mut at = u32_at(bytes, eocd + 16).unwrap_or(u32::MAX) as usize;
    if count == 0xffff || at == 0xffff_ffff {
        return Err(err(file, "a zip64 archive (over 4 GiB) is not supported"));
    }
    let mut out = Vec::new();
    for _ in 0..count {
        let bad = |what: &str| {
            err(
                file,
                format!("central directory entry at byte {at}: {what}"),
            )
        };
        if u32_at(bytes, at) != Some(0x0201_4b50) {
            return Err(bad("bad signature (the file is truncated or not a zip)"));
        }
        let method = u16_at(bytes, at + 10).ok_or_else(|| bad("truncated"))?;
        let compressed = u32_at(bytes, at + 20).ok_or_else(|| bad("truncated"))? as usize;
        let size = u32_at(bytes, at + 24).ok_or_else(|| bad("truncated"))? as usize;
        let name_len = u16_at(bytes, at + 28).ok_or_else(|| bad("truncated"))? as usize;
        let extra_len = u16_at(bytes, at + 30).ok_or_else(|| bad("truncated"))? as usize;
        let comment_len = u16_at(bytes, at + 32).ok_or_else(|| bad("truncated"))? as usize;
        let local = u32_at(bytes, at + 42).ok_or_else(|| bad("truncated"))? as usize;
        let name = bytes
            .get(at + 46..at + 46 + name_len)
            .ok_or_else(|| bad("truncated name"))?;
        let name = String::from_utf8_lossy(name).to_string();
        if compressed == 0xffff_ffff || size == 0xffff_ffff {
            return Err(bad("zip64 sizes are not supported"));
        }
        // The local header has its own name and extra field lengths.
        let lname =
            u16_at(bytes, local + 26).ok_or_else(|| bad("local header truncated"))? as usize;
        let lextra =
            u16_at(bytes, local + 28).ok_or_else(|| bad("local header truncated"))? as usize;
        if u32_at(bytes, local) != Some(0x0403_4b50) {
            return Err(err(
                file,
                format!("member `{name}`: no local header at byte {local}"),
            ));
        }
        let start = local + 30 + lname + lextra;
        let raw = bytes
            .get(start..start + compressed)
            .ok_or_else(|| err(file, format!("member `{name}`: data at bytes {start}..{} is past the end of the file ({} bytes): truncated", start + compressed, bytes.len())))?;
        let data = match method {
            0 => raw.to_vec(),
            8 => {
                let mut d = Vec::with_capacity(size);
                DeflateDecoder::new(raw)
                    .read_to_end(&mut d)
                    .map_err(|e| err(file, format!("member `{name}`: deflate data is corrupt: {e}")))?;
                d
            }
            m => return Err(err(file, format!("member `{name}`: compression method {m} is not supported (stored and deflate are)"))),
        };
        if data.len() != size {
            return Err(err(
                file,
                format!(
                    "member `{name}`: {} bytes, the directory says {size}",
                    data.len()
                ),
            ));
        }
        let array = parse_npy(&data).map_err(|m| err(file, format!("member `{name}`: {m}")))?;
        out.push((name.trim_end_matches(".npy").to_string(), array));
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}

/// The header's value for `key` (`'descr': '<f4'`, `'shape': (2, 3)`).
fn header_field<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let k = format!("'{key}':");
    let at = header.find(&k)? + k.len();
    Some(header[at..].trim_start())
}

/// One `.npy` file's bytes.
pub fn parse_npy(b: &[u8]) -> Result<Array, String> {
    if b.get(..6) != Some(b"\x93NUMPY") {
        return Err("not an .npy array (no \\x93NUMPY magic)".into());
    }
    let major = *b.get(6).ok_or("truncated header")?;
    let (len, start) = match major {
        1 => (u16_at(b, 8).ok_or("truncated header")? as usize, 10),
        2 | 3 => (u32_at(b, 8).ok_or("truncated header")? as usize, 12),
        v => return Err(format!(".npy format version {v} is not supported")),
    };
    let header = b.get(start..start + len).ok_or("truncated header")?;
    let header = std::str::from_utf8(header).map_err(|_| "the header is not text")?;
    let descr = header_field(header, "descr")
        .and_then(|s| s.strip_prefix('\''))
        .and_then(|s| s.split('\'').next())
        .ok_or("the header has no 'descr'")?;
    if header_field(header, "fortran_order").is_some_and(|s| s.starts_with("True")) {
        return Err(
            "Fortran-ordered arrays are not supported (save with np.ascontiguousarray)".into(),
        );
    }
    let shape_text = header_field(header, "shape")
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.split(')').next())
        .ok_or("the header has no 'shape'")?;
    let dims: Vec<i64> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<i64>()
                .map_err(|_| format!("bad shape ({shape_text})"))
        })
        .collect::<Result<_, _>>()?;
    let n: usize = dims.iter().product::<i64>() as usize;
    let data = &b[start + len..];
    let need = |width: usize| -> Result<&[u8], String> {
        data.get(..n * width).ok_or_else(|| {
            format!(
                "{descr} data of shape {dims:?} needs {} bytes, the file has {}: truncated",
                n * width,
                data.len()
            )
        })
    };
    let (ty, values) = match descr {
        "<f4" | "|f4" => (
            ElementType::F32,
            ArrayData::F32(
                need(4)?
                    .chunks(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
        ),
        "<f8" => {
            let mut v = Vec::with_capacity(n);
            for (i, c) in need(8)?.chunks(8).enumerate() {
                let x = f64::from_le_bytes(c.try_into().unwrap_or_default());
                if x.is_finite() && x.abs() > f32::MAX as f64 {
                    return Err(format!("float64 element {i} = {x} is outside float32's range (the device computes in 32 bits)"));
                }
                v.push(x as f32);
            }
            (ElementType::F32, ArrayData::F32(v))
        }
        "<i4" => (
            ElementType::S32,
            ArrayData::S32(
                need(4)?
                    .chunks(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
        ),
        "<i8" => {
            let mut v = Vec::with_capacity(n);
            for (i, c) in need(8)?.chunks(8).enumerate() {
                let x = i64::from_le_bytes(c.try_into().unwrap_or_default());
                v.push(i32::try_from(x).map_err(|_| format!("int64 element {i} = {x} does not fit int32 (the device has no 64-bit integers)"))?);
            }
            (ElementType::S32, ArrayData::S32(v))
        }
        "|u1" => (
            ElementType::S32,
            ArrayData::S32(need(1)?.iter().map(|&x| x as i32).collect()),
        ),
        "|b1" => (
            ElementType::S32,
            ArrayData::S32(need(1)?.iter().map(|&x| (x != 0) as i32).collect()),
        ),
        other => {
            return Err(format!(
                "dtype `{other}` is not supported (little-endian f4, f8, i4, i8, u1 and bool are)"
            ))
        }
    };
    Ok(Array::new(ArrayShape::new(ty, &dims), values))
}
