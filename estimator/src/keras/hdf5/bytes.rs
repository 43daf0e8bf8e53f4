//! Bounds-checked little-endian reads from the file's bytes: every read past the end is a
//! `Corrupt` error naming the byte and what was being read, never a panic.

use super::Hdf5File;
use crate::keras::file::KerasFileError;

/// The all-ones address HDF5 uses for "no address".
pub(crate) const UNDEFINED: u64 = u64::MAX;

/// A read position in the file.
pub(crate) struct Reader<'f> {
    pub(crate) file: &'f Hdf5File,
    pub(crate) pos: u64,
}

impl<'f> Reader<'f> {
    pub(crate) fn at(file: &'f Hdf5File, pos: u64) -> Reader<'f> {
        Reader { file, pos }
    }

    pub(crate) fn bytes(&mut self, n: u64, what: &str) -> Result<&'f [u8], KerasFileError> {
        let out = self.file.slice(self.pos, n, what)?;
        self.pos += n;
        Ok(out)
    }

    pub(crate) fn skip(&mut self, n: u64, what: &str) -> Result<(), KerasFileError> {
        self.bytes(n, what).map(|_| ())
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, KerasFileError> {
        Ok(self.bytes(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, KerasFileError> {
        Ok(self.uint(2, what)? as u16)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, KerasFileError> {
        Ok(self.uint(4, what)? as u32)
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, KerasFileError> {
        self.uint(8, what)
    }

    /// An unsigned little-endian integer of `n` (1..=8) bytes.
    pub(crate) fn uint(&mut self, n: u8, what: &str) -> Result<u64, KerasFileError> {
        let b = self.bytes(u64::from(n), what)?;
        Ok(le_uint(b))
    }

    /// A file address (the superblock's size of offsets); all ones becomes [`UNDEFINED`].
    pub(crate) fn offset(&mut self, what: &str) -> Result<u64, KerasFileError> {
        let n = self.file.sizeof_offsets;
        let v = self.uint(n, what)?;
        Ok(if n < 8 && v == (1u64 << (8 * u32::from(n))) - 1 {
            UNDEFINED
        } else {
            v
        })
    }

    /// A length (the superblock's size of lengths).
    pub(crate) fn length(&mut self, what: &str) -> Result<u64, KerasFileError> {
        self.uint(self.file.sizeof_lengths, what)
    }

    /// Checks a 4-byte signature such as `TREE` or `HEAP`.
    pub(crate) fn signature(&mut self, sig: &[u8; 4]) -> Result<(), KerasFileError> {
        let at = self.pos;
        let what = format!("the signature {}", String::from_utf8_lossy(sig));
        if self.bytes(4, &what)? != sig {
            return Err(self.file.corrupt(at, what));
        }
        Ok(())
    }
}

pub(crate) fn le_uint(b: &[u8]) -> u64 {
    b.iter()
        .rev()
        .fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte))
}
