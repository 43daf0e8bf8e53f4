//! Version 1 B-trees (`TREE`): the nodes of a group's symbol table (leaves are `SNOD`s) and
//! the chunks of a chunked dataset.

use super::bytes::{Reader, UNDEFINED};
use super::Hdf5File;
use crate::keras::file::KerasFileError;

/// One chunk: where its (filtered) bytes are, their size, the filters it skipped, and its
/// element offsets in the dataset.
pub(crate) struct ChunkRef {
    pub(crate) address: u64,
    pub(crate) size: u64,
    pub(crate) filter_mask: u32,
    pub(crate) offsets: Vec<u64>,
}

/// The leaf children (symbol table nodes) of a group's B-tree.
pub(crate) fn group_leaves(file: &Hdf5File, root: u64) -> Result<Vec<u64>, KerasFileError> {
    let mut out = Vec::new();
    walk(
        file,
        root,
        0,
        |r| r.length("a group B-tree key").map(|_| ()),
        |(), child| out.push(child),
    )?;
    Ok(out)
}

/// The chunks of a chunked dataset of rank `rank` (the B-tree's keys hold rank + 1 offsets).
pub(crate) fn chunks(
    file: &Hdf5File,
    root: u64,
    rank: usize,
) -> Result<Vec<ChunkRef>, KerasFileError> {
    let mut out = Vec::new();
    if root == UNDEFINED {
        return Ok(out);
    }
    let key = |r: &mut Reader<'_>| {
        let size = u64::from(r.u32("a chunk's size")?);
        let filter_mask = r.u32("a chunk's filter mask")?;
        let mut offsets = Vec::with_capacity(rank + 1);
        for _ in 0..=rank {
            offsets.push(r.u64("a chunk's offset")?);
        }
        offsets.truncate(rank);
        Ok((size, filter_mask, offsets))
    };
    walk(
        file,
        root,
        1,
        key,
        |(size, filter_mask, offsets), address| {
            out.push(ChunkRef {
                address,
                size,
                filter_mask,
                offsets,
            })
        },
    )?;
    Ok(out)
}

/// Walks the tree depth-first; `key` reads the key before each child, `leaf` gets each
/// level-0 child with its key (the last key, after the last child, is not read).
fn walk<K>(
    file: &Hdf5File,
    root: u64,
    node_type: u8,
    mut key: impl FnMut(&mut Reader<'_>) -> Result<K, KerasFileError>,
    mut leaf: impl FnMut(K, u64),
) -> Result<(), KerasFileError> {
    // (address, the level its parent expects)
    let mut stack = vec![(root, None::<u8>)];
    let mut visited = 0u64;
    while let Some((address, expected_level)) = stack.pop() {
        visited += 1;
        if visited > 1 + file.len() / 24 {
            return Err(file.corrupt(address, "a B-tree without cycles"));
        }
        let mut r = Reader::at(file, address);
        r.signature(b"TREE")?;
        let kind = r.u8("the B-tree node type")?;
        if kind != node_type {
            return Err(file.corrupt(address + 4, format!("a B-tree node of type {node_type}")));
        }
        let level = r.u8("the B-tree node level")?;
        if expected_level.is_some_and(|l| l != level) {
            return Err(file.corrupt(address + 5, "a B-tree node one level below its parent"));
        }
        let entries = r.u16("the B-tree entry count")?;
        r.offset("the left sibling")?;
        r.offset("the right sibling")?;
        let mut children = Vec::with_capacity(usize::from(entries));
        for _ in 0..entries {
            let k = key(&mut r)?;
            let child = r.offset("a B-tree child address")?;
            if level == 0 {
                leaf(k, child);
            } else {
                children.push(child);
            }
        }
        if level > 0 {
            let next = level - 1;
            stack.extend(children.into_iter().rev().map(|c| (c, Some(next))));
        }
    }
    Ok(())
}
