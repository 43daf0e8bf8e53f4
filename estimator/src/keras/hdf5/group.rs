//! A group's members: from its symbol table (B-tree, `SNOD` nodes and local heap; h5py's
//! default) or from link messages (compact link storage of `libver="latest"` files).

use super::bytes::{Reader, UNDEFINED};
use super::object_header::{self, Message, LINK, LINK_INFO, SYMBOL_TABLE};
use super::{btree, Hdf5File};
use crate::keras::file::KerasFileError;

/// Where a member name leads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Target {
    /// An object header address in this file.
    Hard(u64),
    /// A soft link (a path) or an external link: refused when followed.
    Soft(String),
    External,
}

pub(crate) fn members(
    file: &Hdf5File,
    messages: &[Message],
) -> Result<Vec<(String, Target)>, KerasFileError> {
    if let Some(table) = object_header::find(messages, SYMBOL_TABLE) {
        return symbol_table(file, table);
    }
    if let Some(info) = object_header::find(messages, LINK_INFO) {
        let mut r = Reader::at(file, info.at);
        r.skip(1, "the link info version")?;
        let flags = r.u8("the link info flags")?;
        if flags & 0x01 != 0 {
            r.skip(8, "the link info's maximum creation index")?;
        }
        if r.offset("the link info's fractal heap address")? != UNDEFINED {
            return Err(file.unsupported(info.at, "dense link storage (a fractal heap of links)"));
        }
    }
    messages
        .iter()
        .filter(|m| m.kind == LINK)
        .map(|m| link(file, *m))
        .collect()
}

fn symbol_table(file: &Hdf5File, msg: Message) -> Result<Vec<(String, Target)>, KerasFileError> {
    let mut r = Reader::at(file, msg.at);
    let tree = r.offset("the symbol table's B-tree address")?;
    let heap = r.offset("the symbol table's local heap address")?;
    let mut h = Reader::at(file, heap);
    h.signature(b"HEAP")?;
    h.skip(4, "the local heap version")?;
    let heap_size = h.length("the local heap data size")?;
    h.length("the local heap free list offset")?;
    let data_at = h.offset("the local heap data address")?;
    let names = file.slice(data_at, heap_size, "the local heap data")?;
    let name_at = |offset: u64| -> Result<String, KerasFileError> {
        let tail = names
            .get(offset as usize..)
            .filter(|_| offset < heap_size)
            .ok_or_else(|| file.corrupt(data_at, "a link name offset inside the local heap"))?;
        let end = tail
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| file.corrupt(data_at + offset, "a null-terminated link name"))?;
        String::from_utf8(tail[..end].to_vec())
            .map_err(|_| file.corrupt(data_at + offset, "a link name in UTF-8"))
    };
    let mut out = Vec::new();
    for node in btree::group_leaves(file, tree)? {
        let mut r = Reader::at(file, node);
        r.signature(b"SNOD")?;
        r.skip(2, "the symbol table node version")?;
        let count = r.u16("the symbol table node's entry count")?;
        for _ in 0..count {
            let name_offset = r.offset("a symbol's link name offset")?;
            let header = r.offset("a symbol's object header address")?;
            let cache_type = r.u32("a symbol's cache type")?;
            r.skip(4, "a symbol entry")?;
            let scratch = r.pos;
            r.skip(16, "a symbol's scratch pad")?;
            let name = name_at(name_offset)?;
            let target = if cache_type == 2 {
                let value_offset = Reader::at(file, scratch).u32("a soft link's value offset")?;
                Target::Soft(name_at(u64::from(value_offset))?)
            } else {
                Target::Hard(header)
            };
            out.push((name, target));
        }
    }
    Ok(out)
}

fn link(file: &Hdf5File, msg: Message) -> Result<(String, Target), KerasFileError> {
    let mut r = Reader::at(file, msg.at);
    let version = r.u8("the link message version")?;
    if version != 1 {
        return Err(file.unsupported(msg.at, format!("link message version {version}")));
    }
    let flags = r.u8("the link message flags")?;
    let kind = if flags & 0x08 != 0 {
        r.u8("the link type")?
    } else {
        0
    };
    if flags & 0x04 != 0 {
        r.skip(8, "the link's creation order")?;
    }
    if flags & 0x10 != 0 {
        r.skip(1, "the link name's character set")?;
    }
    let name_len = r.uint(1 << (flags & 0x03), "the link name length")?;
    let name = String::from_utf8(r.bytes(name_len, "the link name")?.to_vec())
        .map_err(|_| file.corrupt(msg.at, "a link name in UTF-8"))?;
    let target = match kind {
        0 => Target::Hard(r.offset("a hard link's address")?),
        1 => {
            let len = u64::from(r.u16("a soft link's length")?);
            let path = r.bytes(len, "a soft link's path")?;
            Target::Soft(String::from_utf8_lossy(path).into_owned())
        }
        64 => Target::External,
        k => return Err(file.unsupported(msg.at, format!("link type {k}"))),
    };
    Ok((name, target))
}
