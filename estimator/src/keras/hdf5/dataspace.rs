//! The dataspace message: a dataset's or attribute's shape (scalar, simple or null).

use super::bytes::Reader;
use super::Hdf5File;
use crate::keras::file::KerasFileError;

/// The shape; a scalar is `[]`, a null dataspace (no elements) is `None`.
pub(crate) fn read(file: &Hdf5File, at: u64) -> Result<Option<Vec<u64>>, KerasFileError> {
    let mut r = Reader::at(file, at);
    let version = r.u8("the dataspace version")?;
    let rank = r.u8("the dataspace rank")?;
    let flags = r.u8("the dataspace flags")?;
    let null = match version {
        1 => {
            r.skip(5, "the dataspace")?;
            false
        }
        2 => r.u8("the dataspace type")? == 2,
        v => return Err(file.unsupported(at, format!("dataspace version {v}"))),
    };
    let mut dims = Vec::with_capacity(usize::from(rank));
    for _ in 0..rank {
        dims.push(r.length("a dataspace dimension")?);
    }
    if flags & 0x02 != 0 && version == 1 {
        return Err(file.unsupported(at, "a dataspace permutation"));
    }
    Ok(if null { None } else { Some(dims) })
}
