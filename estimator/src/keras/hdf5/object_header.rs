//! Object headers (version 1, and version 2 `OHDR`/`OCHK`): the list of header messages of a
//! group or dataset, following continuation messages.

use super::bytes::{Reader, UNDEFINED};
use super::Hdf5File;
use crate::keras::file::KerasFileError;

pub(crate) const NIL: u16 = 0x0000;
pub(crate) const DATASPACE: u16 = 0x0001;
pub(crate) const LINK_INFO: u16 = 0x0002;
pub(crate) const DATATYPE: u16 = 0x0003;
pub(crate) const LINK: u16 = 0x0006;
pub(crate) const EXTERNAL_FILES: u16 = 0x0007;
pub(crate) const LAYOUT: u16 = 0x0008;
pub(crate) const FILTERS: u16 = 0x000B;
pub(crate) const ATTRIBUTE: u16 = 0x000C;
pub(crate) const CONTINUATION: u16 = 0x0010;
pub(crate) const SYMBOL_TABLE: u16 = 0x0011;
pub(crate) const ATTRIBUTE_INFO: u16 = 0x0015;

/// One header message: its type and where its bytes are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Message {
    pub(crate) kind: u16,
    pub(crate) at: u64,
    pub(crate) size: u64,
}

/// The messages of the object header at `address`.
pub(crate) fn read(file: &Hdf5File, address: u64) -> Result<Vec<Message>, KerasFileError> {
    if address == UNDEFINED {
        return Err(file.corrupt(address, "an object header address"));
    }
    let sig = file.slice(address, 4, "an object header")?;
    let mut messages = Vec::new();
    if sig == b"OHDR" {
        read_v2(file, address, &mut messages)?;
    } else {
        read_v1(file, address, &mut messages)?;
    }
    Ok(messages)
}

fn read_v1(file: &Hdf5File, address: u64, out: &mut Vec<Message>) -> Result<(), KerasFileError> {
    let mut r = Reader::at(file, address);
    let version = r.u8("the object header version")?;
    if version != 1 {
        return Err(file.corrupt(address, "an object header of version 1 or 2"));
    }
    r.skip(1, "the object header")?;
    let count = u64::from(r.u16("the object header's message count")?);
    r.skip(4, "the object header's reference count")?;
    let size = u64::from(r.u32("the object header's size")?);
    // The messages start 8-byte aligned after the 12-byte prefix.
    let mut blocks = vec![(address + 16, size)];
    let mut seen = 0u64;
    let mut visited = 0u64;
    while let Some((start, len)) = blocks.pop() {
        visited += 1;
        if visited > 1 + file.len() / 16 {
            return Err(file.corrupt(start, "object header continuations that end"));
        }
        file.slice(start, len, "an object header block")?;
        let end = start + len;
        let mut r = Reader::at(file, start);
        while r.pos + 8 <= end && seen < count {
            let at = r.pos;
            let kind = r.u16("a header message type")?;
            let size = u64::from(r.u16("a header message size")?);
            let flags = r.u8("header message flags")?;
            r.skip(3, "a header message")?;
            let data = r.pos;
            if data + size > end {
                return Err(file.corrupt(at, "a header message that fits its object header"));
            }
            push(file, out, &mut blocks, kind, flags, data, size)?;
            r.pos = data + size;
            seen += 1;
        }
    }
    Ok(())
}

fn read_v2(file: &Hdf5File, address: u64, out: &mut Vec<Message>) -> Result<(), KerasFileError> {
    let mut r = Reader::at(file, address + 4);
    let version = r.u8("the object header version")?;
    if version != 2 {
        return Err(file.corrupt(address + 4, "an OHDR object header of version 2"));
    }
    let flags = r.u8("the object header flags")?;
    if flags & 0x20 != 0 {
        r.skip(16, "the object header's times")?;
    }
    if flags & 0x10 != 0 {
        r.skip(4, "the object header's attribute phase change values")?;
    }
    let size_bytes = 1u8 << (flags & 0x03);
    let size = r.uint(size_bytes, "the size of the object header's first chunk")?;
    let order_tracked = flags & 0x04 != 0;
    let mut blocks = vec![(r.pos, size)];
    let mut visited = 0u64;
    while let Some((start, len)) = blocks.pop() {
        visited += 1;
        if visited > 1 + file.len() / 16 {
            return Err(file.corrupt(start, "object header continuations that end"));
        }
        file.slice(start, len, "an object header block")?;
        let end = start + len;
        let mut r = Reader::at(file, start);
        if visited > 1 {
            r.signature(b"OCHK")?;
        }
        let prefix = if order_tracked { 6 } else { 4 };
        // Messages end 4 bytes (the checksum) before the block's end; a smaller rest is a gap.
        while r.pos + prefix <= end.saturating_sub(4) {
            let at = r.pos;
            let kind = u16::from(r.u8("a header message type")?);
            let size = u64::from(r.u16("a header message size")?);
            let mflags = r.u8("header message flags")?;
            if order_tracked {
                r.skip(2, "a header message's creation order")?;
            }
            let data = r.pos;
            if data + size > end {
                return Err(file.corrupt(at, "a header message that fits its object header"));
            }
            push(file, out, &mut blocks, kind, mflags, data, size)?;
            r.pos = data + size;
        }
    }
    Ok(())
}

fn push(
    file: &Hdf5File,
    out: &mut Vec<Message>,
    blocks: &mut Vec<(u64, u64)>,
    kind: u16,
    flags: u8,
    at: u64,
    size: u64,
) -> Result<(), KerasFileError> {
    if flags & 0x02 != 0 {
        return Err(file.unsupported(at, "a shared object header message"));
    }
    match kind {
        NIL => {}
        CONTINUATION => {
            let mut r = Reader::at(file, at);
            let address = r.offset("a continuation address")?;
            let length = r.length("a continuation length")?;
            blocks.push((address, length));
        }
        _ => out.push(Message { kind, at, size }),
    }
    Ok(())
}

/// The first message of a kind, if any.
pub(crate) fn find(messages: &[Message], kind: u16) -> Option<Message> {
    messages.iter().copied().find(|m| m.kind == kind)
}
