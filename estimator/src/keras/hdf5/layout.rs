//! The data layout message (versions 3 and 4) and reading a dataset's raw bytes: compact,
//! contiguous, or chunked (v1 B-tree index, or v4's single-chunk index) through the filters.

use super::bytes::{Reader, UNDEFINED};
use super::filters::{self, Filter};
use super::object_header::Message;
use super::{btree, Hdf5File};
use crate::keras::file::KerasFileError;

pub(crate) enum Layout {
    Compact {
        at: u64,
        size: u64,
    },
    Contiguous {
        address: u64,
        size: u64,
    },
    /// Chunk dimensions (without the element-size dimension) and the B-tree's address.
    Chunked {
        address: u64,
        chunk: Vec<u64>,
    },
    /// A v4 layout whose one chunk is the whole dataset.
    SingleChunk {
        address: u64,
        size: Option<u64>,
        mask: u32,
    },
}

pub(crate) fn read(file: &Hdf5File, msg: Message) -> Result<Layout, KerasFileError> {
    let mut r = Reader::at(file, msg.at);
    let version = r.u8("the data layout version")?;
    if version != 3 && version != 4 {
        return Err(file.unsupported(msg.at, format!("data layout version {version}")));
    }
    let class = r.u8("the data layout class")?;
    Ok(match class {
        0 => {
            let size = u64::from(r.u16("the compact data size")?);
            Layout::Compact { at: r.pos, size }
        }
        1 => Layout::Contiguous {
            address: r.offset("the contiguous data address")?,
            size: r.length("the contiguous data size")?,
        },
        2 if version == 3 => {
            let dims = r.u8("the chunk dimensionality")?;
            let address = r.offset("the chunk B-tree address")?;
            let mut chunk = Vec::new();
            for _ in 0..dims {
                chunk.push(u64::from(r.u32("a chunk dimension")?));
            }
            chunk.pop();
            Layout::Chunked { address, chunk }
        }
        2 => {
            let flags = r.u8("the chunked layout flags")?;
            let dims = r.u8("the chunk dimensionality")?;
            let width = r.u8("the chunk dimension size")?;
            if !(1..=8).contains(&width) {
                return Err(file.corrupt(r.pos - 1, "a chunk dimension size of 1 to 8 bytes"));
            }
            r.skip(u64::from(dims) * u64::from(width), "the chunk dimensions")?;
            let index = r.u8("the chunk index type")?;
            if index != 1 {
                let name = match index {
                    2 => "implicit",
                    3 => "fixed array",
                    4 => "extensible array",
                    5 => "version 2 B-tree",
                    _ => "unknown",
                };
                return Err(file.unsupported(msg.at, format!("the {name} chunk index")));
            }
            let (size, mask) = if flags & 0x02 != 0 {
                (
                    Some(r.length("the filtered chunk size")?),
                    r.u32("the chunk filter mask")?,
                )
            } else {
                (None, 0)
            };
            Layout::SingleChunk {
                address: r.offset("the chunk address")?,
                size,
                mask,
            }
        }
        3 => return Err(file.unsupported(msg.at, "virtual dataset storage")),
        c => return Err(file.corrupt(msg.at + 1, format!("a data layout class 0 to 3, not {c}"))),
    })
}

/// The dataset's bytes, `total` of them (element count times element size).
pub(crate) fn read_bytes(
    file: &Hdf5File,
    layout: &Layout,
    filters: &[Filter],
    shape: &[u64],
    element: u64,
    total: u64,
    at: u64,
) -> Result<Vec<u8>, KerasFileError> {
    // Filtered data can expand; a hostile shape must not make us allocate without bound.
    if total > file.len().saturating_mul(1100).max(1 << 20) {
        return Err(file.corrupt(
            at,
            format!("a dataset size ({total} bytes) the file can hold"),
        ));
    }
    match *layout {
        Layout::Compact { at, size } | Layout::Contiguous { address: at, size } => {
            if at == UNDEFINED {
                return Ok(vec![0; total as usize]);
            }
            if size < total {
                return Err(file.corrupt(at, format!("{total} bytes of data, not {size}")));
            }
            Ok(file.slice(at, total, "a dataset's data")?.to_vec())
        }
        Layout::SingleChunk {
            address,
            size,
            mask,
        } => {
            if address == UNDEFINED {
                return Ok(vec![0; total as usize]);
            }
            let raw = file.slice(address, size.unwrap_or(total), "a dataset's chunk")?;
            filters::undo(file, address, filters, mask, raw.to_vec(), total)
        }
        Layout::Chunked { address, ref chunk } => {
            chunked(file, address, chunk, filters, shape, element, total, at)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn chunked(
    file: &Hdf5File,
    address: u64,
    chunk: &[u64],
    filters: &[Filter],
    shape: &[u64],
    element: u64,
    total: u64,
    at: u64,
) -> Result<Vec<u8>, KerasFileError> {
    if shape.is_empty() || chunk.len() != shape.len() || chunk.contains(&0) {
        return Err(file.corrupt(at, "chunk dimensions matching the dataspace's rank"));
    }
    let chunk_elems = chunk
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n.saturating_mul(element) <= file.len().saturating_mul(1100).max(1 << 20))
        .ok_or_else(|| file.corrupt(at, "a chunk size the file can hold"))?;
    let chunk_bytes = chunk_elems * element;
    let mut out = vec![0u8; total as usize];
    let rank = shape.len();
    for c in btree::chunks(file, address, rank)? {
        let raw = file.slice(c.address, c.size, "a chunk")?.to_vec();
        let data = filters::undo(file, c.address, filters, c.filter_mask, raw, chunk_bytes)?;
        if c.offsets.iter().zip(chunk).any(|(o, d)| o % d != 0)
            || c.offsets.iter().zip(shape).any(|(o, s)| o >= s)
        {
            return Err(file.corrupt(
                c.address,
                "a chunk offset on the chunk grid inside the dataset",
            ));
        }
        copy_chunk(&mut out, &data, &c.offsets, chunk, shape, element as usize);
    }
    Ok(out)
}

/// Copies one chunk's rows into the row-major dataset, clipping chunks at the edges.
fn copy_chunk(
    out: &mut [u8],
    data: &[u8],
    offsets: &[u64],
    chunk: &[u64],
    shape: &[u64],
    esize: usize,
) {
    let rank = shape.len();
    let last = rank - 1;
    let row = (chunk[last].min(shape[last] - offsets[last])) as usize * esize;
    // Iterate over the chunk's index tuples of the leading dimensions.
    let mut idx = vec![0u64; last];
    loop {
        let inside = (0..last).all(|d| offsets[d] + idx[d] < shape[d]);
        if inside {
            let (mut src, mut dst) = (0u64, 0u64);
            for d in 0..rank {
                let i = if d < last { idx[d] } else { 0 };
                src = src * chunk[d] + i;
                dst = dst * shape[d] + offsets[d] + i;
            }
            let (src, dst) = (src as usize * esize, dst as usize * esize);
            out[dst..dst + row].copy_from_slice(&data[src..src + row]);
        }
        let mut d = last;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < chunk[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}
