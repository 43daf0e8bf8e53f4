//! Attribute messages (versions 1 to 3) and the values they hold.

use super::bytes::Reader;
use super::datatype::{self, Datatype};
use super::object_header::Message;
use super::{dataspace, values, Hdf5File};
use crate::keras::file::KerasFileError;

/// One attribute of a group or dataset.
pub struct Attribute<'f> {
    file: &'f Hdf5File,
    pub name: String,
    pub datatype: Datatype,
    /// `[]` for a scalar, `None` for a null dataspace (an empty attribute).
    pub shape: Option<Vec<u64>>,
    /// Where the value's bytes start.
    at: u64,
    bytes: &'f [u8],
}

impl<'f> Attribute<'f> {
    /// The values as strings (an attribute of fixed- or variable-length strings).
    pub fn strings(&self) -> Result<Vec<String>, KerasFileError> {
        values::strings(self.file, self.at, self.bytes, &self.datatype)
    }

    /// The single string of a scalar string attribute.
    pub fn string(&self) -> Result<String, KerasFileError> {
        let mut all = self.strings()?;
        if all.len() != 1 {
            return Err(self.file.corrupt(
                self.at,
                format!("one string in the attribute `{}`", self.name),
            ));
        }
        Ok(all.remove(0))
    }

    /// The values as numbers.
    pub fn numbers(&self) -> Result<Vec<f64>, KerasFileError> {
        values::numbers(self.file, self.at, self.bytes, &self.datatype)
    }
}

pub(crate) fn read(file: &Hdf5File, msg: Message) -> Result<Attribute<'_>, KerasFileError> {
    let end = msg.at + msg.size;
    let mut r = Reader::at(file, msg.at);
    let version = r.u8("the attribute message version")?;
    let flags = r.u8("the attribute message flags")?;
    let name_size = u64::from(r.u16("the attribute name size")?);
    let type_size = u64::from(r.u16("the attribute datatype size")?);
    let space_size = u64::from(r.u16("the attribute dataspace size")?);
    let pad = |n: u64| if version == 1 { n.div_ceil(8) * 8 } else { n };
    match version {
        1 | 2 => {}
        3 => r.skip(1, "the attribute name encoding")?,
        v => return Err(file.unsupported(msg.at, format!("attribute message version {v}"))),
    }
    if version > 1 && flags & 0x03 != 0 {
        return Err(file.unsupported(msg.at, "a shared attribute datatype or dataspace"));
    }
    let name_bytes = r.bytes(name_size, "the attribute name")?;
    let name_end = name_bytes
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(name_bytes.len());
    let name = String::from_utf8(name_bytes[..name_end].to_vec())
        .map_err(|_| file.corrupt(msg.at, "an attribute name in UTF-8"))?;
    r.pos += pad(name_size) - name_size;
    let type_at = r.pos;
    r.skip(pad(type_size), "the attribute datatype")?;
    let space_at = r.pos;
    r.skip(pad(space_size), "the attribute dataspace")?;
    let datatype = datatype::read(file, type_at)?;
    let shape = dataspace::read(file, space_at)?;
    let count = match &shape {
        None => 0,
        Some(dims) => element_count(file, space_at, dims)?,
    };
    let at = r.pos;
    let len = count
        .checked_mul(datatype.element_size(file))
        .filter(|&n| at + n <= end)
        .ok_or_else(|| {
            file.corrupt(
                at,
                format!("the value of the attribute `{name}` inside its message"),
            )
        })?;
    let bytes = file.slice(at, len, "an attribute value")?;
    Ok(Attribute {
        file,
        name,
        datatype,
        shape,
        at,
        bytes,
    })
}

/// The number of elements of `dims`, refusing products that overflow or exceed the file.
pub(crate) fn element_count(file: &Hdf5File, at: u64, dims: &[u64]) -> Result<u64, KerasFileError> {
    dims.iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| file.corrupt(at, "a dataspace whose element count fits 64 bits"))
}
