//! One TFRecord on disk: `u64` little-endian length, masked CRC32C of those 8 bytes, the data,
//! masked CRC32C of the data. The CRCs are "masked" (rotated and offset) because TF also stores
//! CRCs of data that itself contains CRCs, where a plain CRC would be weak.

use crate::input::error::RecordProblem;
use std::io::{self, Read, Write};

/// Length + its CRC.
pub(crate) const HEADER_BYTES: usize = 12;
/// The data's CRC.
pub(crate) const FOOTER_BYTES: usize = 4;

const MASK_DELTA: u32 = 0xa282_ead8;

/// TF's masked CRC32C (`crc32c::Mask` in TensorFlow's `lib/hash/crc32c.h`).
pub(crate) fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The 12 header bytes of a record of `len` bytes.
pub fn header(len: u64) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[..8].copy_from_slice(&len.to_le_bytes());
    let crc = masked_crc(&h[..8]);
    h[8..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Writes one framed record.
pub fn write_record(w: &mut impl Write, data: &[u8]) -> io::Result<()> {
    w.write_all(&header(data.len() as u64))?;
    w.write_all(data)?;
    w.write_all(&masked_crc(data).to_le_bytes())
}

/// Why reading a record failed: the underlying reader, or the record itself.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    Io(io::Error),
    /// The record is bad; `consumed` bytes of it were read.
    Record {
        problem: RecordProblem,
        consumed: u64,
    },
}

/// Reads the next record into `buf` (replacing its contents). `Ok(None)` at a clean end of
/// input (no byte of a next header); `Ok(Some(n))` with the record's size on disk.
pub(crate) fn read_record(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
    check_crc: bool,
) -> Result<Option<u64>, ReadFailure> {
    let mut h = [0u8; HEADER_BYTES];
    let got = read_full(r, &mut h).map_err(ReadFailure::Io)?;
    if got == 0 {
        return Ok(None);
    }
    if got < HEADER_BYTES {
        return Err(ReadFailure::Record {
            problem: RecordProblem::TruncatedHeader { available: got },
            consumed: got as u64,
        });
    }
    let len = u64::from_le_bytes(h[..8].try_into().unwrap());
    if check_crc && masked_crc(&h[..8]) != u32::from_le_bytes(h[8..].try_into().unwrap()) {
        return Err(ReadFailure::Record {
            problem: RecordProblem::LengthCrc,
            consumed: HEADER_BYTES as u64,
        });
    }
    // Grows with what is really there: a bad length (CRCs off) never allocates it up front.
    buf.clear();
    let wanted = len.saturating_add(FOOTER_BYTES as u64);
    let got = r
        .by_ref()
        .take(wanted)
        .read_to_end(buf)
        .map_err(ReadFailure::Io)? as u64;
    if got < wanted {
        return Err(ReadFailure::Record {
            problem: RecordProblem::TruncatedData {
                length: len,
                needed: wanted,
                available: got,
            },
            consumed: HEADER_BYTES as u64 + got,
        });
    }
    let footer = buf.split_off(len as usize);
    let consumed = HEADER_BYTES as u64 + wanted;
    if check_crc && masked_crc(buf) != u32::from_le_bytes(footer[..].try_into().unwrap()) {
        return Err(ReadFailure::Record {
            problem: RecordProblem::DataCrc { length: len },
            consumed,
        });
    }
    Ok(Some(consumed))
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_matches_tensorflow() {
        // The CRC32C check value, and the bytes tf.io.TFRecordWriter (TF 2.15) writes for b"abc".
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        let mut out = Vec::new();
        write_record(&mut out, b"abc").unwrap();
        let tf = [
            3, 0, 0, 0, 0, 0, 0, 0, 176, 153, 73, 14, 97, 98, 99, 110, 87, 241, 33,
        ];
        assert_eq!(out, tf);
    }
}
