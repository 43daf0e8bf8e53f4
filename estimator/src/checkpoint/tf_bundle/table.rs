//! A reader of the `.index` file: a LevelDB-format SSTable, as TF's `table_builder` writes it.
//!
//! Layout: data blocks, a metaindex block, an index block, then a 48-byte footer holding the
//! metaindex and index block handles (varint64 offset and size each, zero-padded to 40 bytes)
//! and the magic number. Every block is followed by a 5-byte trailer: the compression type
//! (0 = none, 1 = snappy) and the masked CRC32C of the block and that type byte. A block is a
//! run of prefix-compressed entries (`shared`, `non_shared`, `value_len` varint32s, the key's
//! new suffix, the value), then the restart offsets (u32 each) and their count (u32).

use super::masked_crc32c;

/// One (key, value) of a block.
pub(super) type Entry = (Vec<u8>, Vec<u8>);

const FOOTER_LEN: usize = 48;
/// The footer's two block handles, zero-padded to this length, precede the magic number.
pub(super) const FOOTER_HANDLES_LEN: usize = 40;
pub(super) const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
const TRAILER_LEN: usize = 5;

/// Every (key, value) of the table in key order. Errors are messages; the caller names the file.
pub(crate) fn read_table(file: &[u8]) -> Result<Vec<Entry>, String> {
    if file.len() < FOOTER_LEN {
        return Err(format!(
            "it is {} bytes, shorter than a table's {FOOTER_LEN}-byte footer",
            file.len()
        ));
    }
    let footer = &file[file.len() - FOOTER_LEN..];
    let magic = u64::from_le_bytes(footer[40..48].try_into().expect("8 bytes"));
    if magic != MAGIC {
        return Err(format!(
            "bad magic number {magic:#018x} (not a TensorFlow checkpoint index)"
        ));
    }
    let mut at = 0;
    let _metaindex = read_handle(footer, &mut at)?;
    let index = read_handle(footer, &mut at)?;
    let mut out = Vec::new();
    for (_, handle) in read_block(file, index, "index block")? {
        let mut at = 0;
        let data = read_handle(&handle, &mut at)?;
        out.extend(read_block(file, data, "data block")?);
    }
    for pair in out.windows(2) {
        if pair[0].0 >= pair[1].0 {
            return Err("keys are not in increasing order".into());
        }
    }
    Ok(out)
}

/// A block handle: (offset, size).
fn read_handle(bytes: &[u8], at: &mut usize) -> Result<(u64, u64), String> {
    Ok((varint(bytes, at)?, varint(bytes, at)?))
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let &b = bytes
            .get(*at)
            .ok_or_else(|| "a varint runs past its block".to_string())?;
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a varint is longer than 10 bytes".into())
}

/// The entries of the block at `handle`, after checking its trailer.
fn read_block(file: &[u8], (offset, size): (u64, u64), what: &str) -> Result<Vec<Entry>, String> {
    let start = usize::try_from(offset).map_err(|_| format!("{what} offset {offset} too large"))?;
    let end = usize::try_from(size)
        .ok()
        .and_then(|s| start.checked_add(s))
        .filter(|&e| e.checked_add(TRAILER_LEN).is_some_and(|t| t <= file.len()))
        .ok_or_else(|| {
            format!(
                "the {what} at offset {offset}, {size} bytes, runs past the end of the file ({} bytes)",
                file.len()
            )
        })?;
    let block = &file[start..end];
    let kind = file[end];
    let stored = u32::from_le_bytes(file[end + 1..end + 5].try_into().expect("4 bytes"));
    let actual = masked_crc32c(&file[start..end + 1]);
    if stored != actual {
        return Err(format!(
            "CRC32C mismatch in the {what} at offset {offset} (stored {stored:#010x}, computed {actual:#010x}): the file is corrupted"
        ));
    }
    match kind {
        0 => {}
        1 => {
            return Err(format!(
                "the {what} at offset {offset} is snappy-compressed, which tessel does not read (TensorFlow writes checkpoint indexes uncompressed)"
            ))
        }
        k => return Err(format!("the {what} at offset {offset} has unknown compression type {k}")),
    }
    parse_block(block).map_err(|m| format!("the {what} at offset {offset}: {m}"))
}

fn parse_block(block: &[u8]) -> Result<Vec<Entry>, String> {
    if block.len() < 4 {
        return Err("shorter than its restart count".into());
    }
    let restarts =
        u32::from_le_bytes(block[block.len() - 4..].try_into().expect("4 bytes")) as usize;
    let entries_end = restarts
        .checked_mul(4)
        .and_then(|r| (block.len() - 4).checked_sub(r))
        .ok_or_else(|| {
            format!(
                "{restarts} restart points do not fit in {} bytes",
                block.len()
            )
        })?;
    let entries = &block[..entries_end];
    let mut out: Vec<Entry> = Vec::new();
    let mut key = Vec::new();
    let mut at = 0;
    while at < entries.len() {
        let shared = varint(entries, &mut at)? as usize;
        let non_shared = varint(entries, &mut at)? as usize;
        let value_len = varint(entries, &mut at)? as usize;
        if shared > key.len() {
            return Err(format!(
                "an entry shares {shared} bytes with a previous key of {}",
                key.len()
            ));
        }
        let key_end = at
            .checked_add(non_shared)
            .filter(|&e| e <= entries.len())
            .ok_or("a key runs past its block")?;
        let value_end = key_end
            .checked_add(value_len)
            .filter(|&e| e <= entries.len())
            .ok_or("a value runs past its block")?;
        key.truncate(shared);
        key.extend_from_slice(&entries[at..key_end]);
        out.push((key.clone(), entries[key_end..value_end].to_vec()));
        at = value_end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_prefix_compressed_keys() {
        let mut at = 0;
        assert_eq!(varint(&[0xac, 0x02], &mut at).unwrap(), 300);
        assert_eq!(at, 2);
        assert!(varint(&[0x80], &mut 0).is_err());
        // "abc"->"1", "abd"->"22" (shares 2), one restart at 0.
        let mut block = vec![0, 3, 1, b'a', b'b', b'c', b'1', 2, 1, 2, b'd', b'2', b'2'];
        block.extend(0u32.to_le_bytes());
        block.extend(1u32.to_le_bytes());
        let entries = parse_block(&block).unwrap();
        assert_eq!(
            entries,
            vec![
                (b"abc".to_vec(), b"1".to_vec()),
                (b"abd".to_vec(), b"22".to_vec())
            ]
        );
        // Sharing more than the previous key has is refused, not a panic.
        let mut bad = vec![5, 1, 0, b'x'];
        bad.extend(0u32.to_le_bytes());
        assert!(parse_block(&bad).unwrap_err().contains("shares 5"));
    }
}

#[cfg(test)]
mod writer_tests {
    //! Tables with several data blocks, as TF writes for indexes past its 256 KiB block size,
    //! built here by a minimal writer (prefix compression, a restart every 2 entries).
    use super::*;

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn block(entries: &[Entry]) -> Vec<u8> {
        let (mut out, mut restarts, mut prev) = (Vec::new(), Vec::new(), Vec::<u8>::new());
        for (i, (k, v)) in entries.iter().enumerate() {
            let shared = if i % 2 == 0 {
                restarts.push(out.len() as u32);
                0
            } else {
                prev.iter().zip(k).take_while(|(a, b)| a == b).count()
            };
            put_varint(&mut out, shared as u64);
            put_varint(&mut out, (k.len() - shared) as u64);
            put_varint(&mut out, v.len() as u64);
            out.extend(&k[shared..]);
            out.extend(v);
            prev = k.clone();
        }
        for r in &restarts {
            out.extend(r.to_le_bytes());
        }
        out.extend((restarts.len() as u32).to_le_bytes());
        out
    }

    /// Appends `contents` with its trailer; returns its handle.
    fn append(file: &mut Vec<u8>, contents: &[u8], kind: u8) -> Vec<u8> {
        let mut handle = Vec::new();
        put_varint(&mut handle, file.len() as u64);
        put_varint(&mut handle, contents.len() as u64);
        let start = file.len();
        file.extend(contents);
        file.push(kind);
        let crc = masked_crc32c(&file[start..]);
        file.extend(crc.to_le_bytes());
        handle
    }

    fn table(blocks: &[Vec<Entry>], kind: u8) -> Vec<u8> {
        let mut file = Vec::new();
        let mut index = Vec::new();
        for b in blocks {
            let handle = append(&mut file, &block(b), kind);
            index.push((b.last().unwrap().0.clone(), handle));
        }
        let meta = append(&mut file, &block(&[]), 0);
        let index = append(&mut file, &block(&index), 0);
        let mut footer = [meta, index].concat();
        footer.resize(40, 0);
        footer.extend(MAGIC.to_le_bytes());
        file.extend(footer);
        file
    }

    fn entries(range: std::ops::Range<u32>) -> Vec<Entry> {
        range
            .map(|i| {
                (
                    format!("layer/var{i:04}").into_bytes(),
                    i.to_le_bytes().to_vec(),
                )
            })
            .collect()
    }

    #[test]
    fn entries_of_every_data_block_in_order() {
        let blocks = [entries(0..5), entries(5..6), entries(6..40)];
        let all: Vec<Entry> = blocks.concat();
        assert_eq!(read_table(&table(&blocks, 0)).unwrap(), all);
    }

    #[test]
    fn snappy_blocks_and_unsorted_keys_are_refused() {
        let e = read_table(&table(&[entries(0..3)], 1)).unwrap_err();
        assert!(e.contains("snappy-compressed"), "{e}");
        let e = read_table(&table(&[entries(3..6), entries(0..3)], 0)).unwrap_err();
        assert!(e.contains("increasing order"), "{e}");
    }
}
