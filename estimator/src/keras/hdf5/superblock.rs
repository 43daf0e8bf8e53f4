//! The superblock: where the file starts, its address and length sizes, and the root group.
//! Versions 0 and 1 (h5py's default, `libver="earliest"`) and 2 and 3 (`libver="latest"`).

use super::bytes::Reader;
use super::Hdf5File;
use crate::keras::file::KerasFileError;

pub(crate) const SIGNATURE: [u8; 8] = *b"\x89HDF\r\n\x1a\n";

pub(crate) struct Superblock {
    /// Where the signature is (0, or 512, 1024, ... after a user block).
    pub(crate) start: u64,
    pub(crate) version: u8,
    pub(crate) sizeof_offsets: u8,
    pub(crate) sizeof_lengths: u8,
    /// The root group's object header address.
    pub(crate) root: u64,
}

/// Finds the signature at 0 or a power of two from 512 on, as HDF5 does.
pub(crate) fn find_signature(data: &[u8]) -> Option<u64> {
    let mut at = 0usize;
    loop {
        if data.len() < at + SIGNATURE.len() {
            return None;
        }
        if data[at..at + SIGNATURE.len()] == SIGNATURE {
            return Some(at as u64);
        }
        at = if at == 0 { 512 } else { at * 2 };
    }
}

pub(crate) fn read(file: &mut Hdf5File, start: u64) -> Result<Superblock, KerasFileError> {
    // The superblock's own fields are read with 8-byte sizes until they are known.
    file.sizeof_offsets = 8;
    file.sizeof_lengths = 8;
    file.base = 0;
    let mut r = Reader::at(file, start + 8);
    let version = r.u8("the superblock version")?;
    let (sizeof_offsets, sizeof_lengths, root);
    match version {
        0 | 1 => {
            r.skip(
                4,
                "the superblock's free-space, root and shared header versions",
            )?;
            sizeof_offsets = r.u8("the size of offsets")?;
            sizeof_lengths = r.u8("the size of lengths")?;
            check_sizes(file, start + 13, sizeof_offsets, sizeof_lengths)?;
            r.skip(1 + 2 + 2 + 4, "the superblock's B-tree K values and flags")?;
            if version == 1 {
                r.skip(4, "the superblock's indexed storage K")?;
            }
            let o = u64::from(sizeof_offsets);
            // base address, free-space address, end of file, driver info block
            r.skip(4 * o, "the superblock's addresses")?;
            // root group symbol table entry: link name offset, then the object header address
            r.skip(o, "the root group's link name offset")?;
            root = r.uint(sizeof_offsets, "the root group's object header address")?;
        }
        2 | 3 => {
            sizeof_offsets = r.u8("the size of offsets")?;
            sizeof_lengths = r.u8("the size of lengths")?;
            check_sizes(file, start + 9, sizeof_offsets, sizeof_lengths)?;
            r.skip(1, "the superblock flags")?;
            let o = u64::from(sizeof_offsets);
            // base address, superblock extension, end of file
            r.skip(3 * o, "the superblock's addresses")?;
            root = r.uint(sizeof_offsets, "the root group's object header address")?;
        }
        v => {
            return Err(file.unsupported(start + 8, format!("superblock version {v}")));
        }
    }
    Ok(Superblock {
        start,
        version,
        sizeof_offsets,
        sizeof_lengths,
        root,
    })
}

fn check_sizes(file: &Hdf5File, at: u64, offsets: u8, lengths: u8) -> Result<(), KerasFileError> {
    for size in [offsets, lengths] {
        if ![2, 4, 8].contains(&size) {
            return Err(file.corrupt(at, "a size of offsets and lengths of 2, 4 or 8 bytes"));
        }
    }
    Ok(())
}
