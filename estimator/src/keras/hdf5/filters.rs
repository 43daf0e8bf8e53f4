//! The filter pipeline message and the two filters h5py applies on request and Keras files
//! may use: deflate (gzip) and shuffle. Any other filter is refused by name.

use super::bytes::Reader;
use super::object_header::Message;
use super::Hdf5File;
use crate::keras::file::KerasFileError;
use std::io::Read;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Filter {
    Deflate,
    /// Shuffle with the element size it was applied with.
    Shuffle(u64),
}

pub(crate) fn read(file: &Hdf5File, msg: Message) -> Result<Vec<Filter>, KerasFileError> {
    let mut r = Reader::at(file, msg.at);
    let version = r.u8("the filter pipeline version")?;
    let count = r.u8("the filter count")?;
    match version {
        1 => r.skip(6, "the filter pipeline")?,
        2 => {}
        v => return Err(file.unsupported(msg.at, format!("filter pipeline version {v}"))),
    }
    let mut out = Vec::new();
    for _ in 0..count {
        let at = r.pos;
        let id = r.u16("a filter id")?;
        let name_len = if version == 1 || id >= 256 {
            u64::from(r.u16("a filter name length")?)
        } else {
            0
        };
        r.skip(2, "the filter flags")?;
        let values = u64::from(r.u16("the filter's client value count")?);
        let name_padded = if version == 1 {
            name_len.div_ceil(8) * 8
        } else {
            name_len
        };
        let name = String::from_utf8_lossy(r.bytes(name_padded, "the filter name")?)
            .trim_end_matches('\0')
            .to_string();
        let mut client = Vec::new();
        for _ in 0..values {
            client.push(u64::from(r.u32("a filter client value")?));
        }
        if version == 1 && values % 2 == 1 {
            r.skip(4, "the filter's padding")?;
        }
        out.push(match id {
            1 => Filter::Deflate,
            2 => Filter::Shuffle(client.first().copied().unwrap_or(1).max(1)),
            _ => {
                let known = match id {
                    3 => "fletcher32",
                    4 => "szip",
                    5 => "nbit",
                    6 => "scaleoffset",
                    32000 => "lzf",
                    _ => name.as_str(),
                };
                return Err(file.unsupported(at, format!("the HDF5 filter {id} ({known})")));
            }
        });
    }
    Ok(out)
}

/// Undoes the pipeline on one chunk (filters run in reverse; bit i of `mask` skips filter i).
/// `expected` is the chunk's unfiltered size: nothing larger is ever allocated.
pub(crate) fn undo(
    file: &Hdf5File,
    at: u64,
    filters: &[Filter],
    mask: u32,
    mut bytes: Vec<u8>,
    expected: u64,
) -> Result<Vec<u8>, KerasFileError> {
    for (i, filter) in filters.iter().enumerate().rev() {
        if i < 32 && mask & (1 << i) != 0 {
            continue;
        }
        bytes = match filter {
            Filter::Deflate => {
                let mut out = Vec::new();
                flate2::read::ZlibDecoder::new(bytes.as_slice())
                    .take(expected + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| file.corrupt(at, format!("a deflate (zlib) stream ({e})")))?;
                out
            }
            Filter::Shuffle(size) => unshuffle(&bytes, *size),
        };
    }
    if bytes.len() as u64 != expected {
        return Err(file.corrupt(
            at,
            format!(
                "a chunk of {expected} bytes once unfiltered, not {}",
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

/// The shuffle filter stores byte 0 of every element, then byte 1, ...; a tail shorter than
/// one element is left as it is.
fn unshuffle(bytes: &[u8], size: u64) -> Vec<u8> {
    let size = size as usize;
    let count = bytes.len() / size;
    let mut out = bytes.to_vec();
    for b in 0..size {
        for e in 0..count {
            out[e * size + b] = bytes[b * count + e];
        }
    }
    out
}
