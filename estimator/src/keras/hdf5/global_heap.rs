//! Global heap collections (`GCOL`): where variable-length strings keep their bytes.

use super::bytes::{le_uint, Reader};
use super::Hdf5File;
use crate::keras::file::KerasFileError;

/// The bytes of a variable-length element (its length, collection address and object index,
/// as `element` holds them).
pub(crate) fn vlen_bytes(file: &Hdf5File, element: &[u8]) -> Result<Vec<u8>, KerasFileError> {
    let o = usize::from(file.sizeof_offsets);
    let length = le_uint(&element[0..4]);
    let collection = le_uint(&element[4..4 + o]);
    let index = le_uint(&element[4 + o..8 + o]) as u32;
    if length == 0 && index == 0 {
        return Ok(Vec::new());
    }
    let object = object(file, collection, index)?;
    if object.len() < length as usize {
        return Err(file.corrupt(
            collection,
            format!("a global heap object {index} of at least {length} bytes"),
        ));
    }
    Ok(object[..length as usize].to_vec())
}

fn object(file: &Hdf5File, collection: u64, index: u32) -> Result<&[u8], KerasFileError> {
    let mut r = Reader::at(file, collection);
    r.signature(b"GCOL")?;
    r.skip(4, "the global heap version")?;
    let size = r.length("the global heap collection size")?;
    file.slice(collection, size, "a global heap collection")?;
    let end = collection + size;
    let lengths = file.sizeof_lengths;
    while r.pos + 8 + u64::from(lengths) <= end {
        let head = r.bytes(8, "a global heap object header")?;
        let this = le_uint(&head[0..2]) as u32;
        let object_size = r.length("a global heap object size")?;
        if this == 0 {
            break;
        }
        let data = r.bytes(object_size, "a global heap object")?;
        if this == index {
            return Ok(data);
        }
        r.pos += (8 - object_size % 8) % 8;
    }
    Err(file.corrupt(
        collection,
        format!("global heap object {index} in the collection"),
    ))
}
