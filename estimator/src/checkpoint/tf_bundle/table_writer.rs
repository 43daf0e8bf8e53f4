//! A writer of the `.index` file: the inverse of [`super::table`], laid out as TF's
//! `table::TableBuilder` lays it out with the options `BundleWriter` gives it (no compression).
//!
//! Data blocks closed once they reach [`BLOCK_SIZE`] bytes (a restart point every
//! [`RESTART_INTERVAL`] entries), an empty metaindex block, an index block (one entry per data
//! block, keyed as LevelDB keys it: a short separator from the next block's first key, a short
//! successor for the last block; a restart at every entry), and the 48-byte footer. The bytes
//! are TF's own for the same tensors (a test compares with a checkpoint TF wrote). Every block gets its 5-byte trailer: compression type 0 and the masked
//! CRC32C of the block and that byte.

use super::masked_crc32c;
use super::table::{FOOTER_HANDLES_LEN, MAGIC};

/// TF's `table::Options::block_size`: a data block is closed once it reaches this size.
const BLOCK_SIZE: usize = 256 * 1024;
/// TF's `table::Options::block_restart_interval`.
const RESTART_INTERVAL: usize = 16;

/// The table's bytes for `entries`, which must be in strictly increasing key order (the
/// caller checks; the reader refuses any other order).
pub(crate) fn write_table(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut file = Vec::new();
    let mut index = BlockBuilder::new(1);
    let mut block = BlockBuilder::new(RESTART_INTERVAL);
    // A closed data block's handle and last key, indexed once the next key is known (LevelDB
    // keys it by a short separator between the two).
    let mut pending: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut last_key: &[u8] = &[];
    for (key, value) in entries {
        if let Some((last, handle)) = pending.take() {
            index.add(&shortest_separator(&last, key), &handle);
        }
        block.add(key, value);
        last_key = key;
        if block.size() >= BLOCK_SIZE {
            let handle = append_block(&mut file, &block.finish());
            pending = Some((last_key.to_vec(), handle));
            block = BlockBuilder::new(RESTART_INTERVAL);
        }
    }
    if !block.is_empty() {
        pending = Some((last_key.to_vec(), append_block(&mut file, &block.finish())));
    }
    if let Some((last, handle)) = pending {
        index.add(&short_successor(&last), &handle);
    }
    let metaindex = append_block(&mut file, &BlockBuilder::new(1).finish());
    let index = append_block(&mut file, &index.finish());
    let mut footer = [metaindex, index].concat();
    footer.resize(FOOTER_HANDLES_LEN, 0);
    footer.extend(MAGIC.to_le_bytes());
    file.extend(footer);
    file
}

/// LevelDB's `BytewiseComparator::FindShortestSeparator`: a short key `k` with
/// `start <= k < limit`, from `start` with one byte raised and the rest cut.
fn shortest_separator(start: &[u8], limit: &[u8]) -> Vec<u8> {
    let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if common < start.len().min(limit.len()) {
        let byte = start[common];
        if byte < 0xff && byte + 1 < limit[common] {
            let mut key = start[..=common].to_vec();
            key[common] += 1;
            return key;
        }
    }
    start.to_vec()
}

/// LevelDB's `BytewiseComparator::FindShortSuccessor`: a short key `>= key`, its first byte
/// that is not 0xff raised and the rest cut.
fn short_successor(key: &[u8]) -> Vec<u8> {
    match key.iter().position(|&b| b != 0xff) {
        Some(i) => {
            let mut out = key[..=i].to_vec();
            out[i] += 1;
            out
        }
        None => key.to_vec(),
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `contents` and its trailer to `file`; returns the block's handle (offset, size).
fn append_block(file: &mut Vec<u8>, contents: &[u8]) -> Vec<u8> {
    let mut handle = Vec::new();
    put_varint(&mut handle, file.len() as u64);
    put_varint(&mut handle, contents.len() as u64);
    let start = file.len();
    file.extend(contents);
    file.push(0); // no compression
    let crc = masked_crc32c(&file[start..]);
    file.extend(crc.to_le_bytes());
    handle
}

/// LevelDB's `BlockBuilder`: prefix-compressed entries, a full key every `interval` entries.
struct BlockBuilder {
    out: Vec<u8>,
    restarts: Vec<u32>,
    interval: usize,
    since_restart: usize,
    previous: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    fn new(interval: usize) -> BlockBuilder {
        BlockBuilder {
            out: Vec::new(),
            // LevelDB's first restart point is at offset 0, even in an empty block.
            restarts: vec![0],
            interval,
            since_restart: 0,
            previous: Vec::new(),
            entries: 0,
        }
    }

    fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.since_restart < self.interval {
            self.previous
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.out.len() as u32);
            self.since_restart = 0;
            0
        };
        put_varint(&mut self.out, shared as u64);
        put_varint(&mut self.out, (key.len() - shared) as u64);
        put_varint(&mut self.out, value.len() as u64);
        self.out.extend(&key[shared..]);
        self.out.extend(value);
        self.previous = key.to_vec();
        self.since_restart += 1;
        self.entries += 1;
    }

    fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The block's size once finished (entries, restart array and count).
    fn size(&self) -> usize {
        self.out.len() + 4 * self.restarts.len() + 4
    }

    fn finish(mut self) -> Vec<u8> {
        for r in &self.restarts {
            self.out.extend(r.to_le_bytes());
        }
        self.out.extend((self.restarts.len() as u32).to_le_bytes());
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::read_table;
    use super::*;

    fn entries(n: u32, value_len: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                (
                    format!("layer_{:03}/kernel/Momentum", i).into_bytes(),
                    vec![i as u8; value_len],
                )
            })
            .collect()
    }

    #[test]
    fn tables_read_back_whole() {
        for (n, value_len) in [(0, 0), (1, 3), (17, 5), (40, 1), (300, 2000)] {
            let all = entries(n, value_len);
            let table = write_table(&all);
            assert_eq!(read_table(&table).unwrap(), all, "{n} entries");
        }
    }

    #[test]
    fn large_tables_have_several_data_blocks() {
        // 300 entries of 2000 bytes: past one 256 KiB block, so at least three index entries.
        let table = write_table(&entries(300, 2000));
        let footer = &table[table.len() - 48..];
        let mut at = 0;
        let mut varint = || {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let b = footer[at];
                at += 1;
                v |= u64::from(b & 0x7f) << shift;
                if b & 0x80 == 0 {
                    break;
                }
            }
            v
        };
        let (_, _, index_offset, index_size) = (varint(), varint(), varint(), varint());
        let index = &table[index_offset as usize..(index_offset + index_size) as usize];
        let restarts = u32::from_le_bytes(index[index.len() - 4..].try_into().unwrap());
        assert!(restarts >= 3, "{restarts} index entries");
    }

    #[test]
    fn index_keys_are_leveldbs_separators_and_successors() {
        assert_eq!(shortest_separator(b"abcx", b"abzz"), b"abd");
        // Adjacent bytes, or one key a prefix of the other: the key stays.
        assert_eq!(shortest_separator(b"abc", b"abd"), b"abc");
        assert_eq!(shortest_separator(b"ab", b"abc"), b"ab");
        assert_eq!(shortest_separator(b"a\xffz", b"b"), b"a\xffz");
        assert_eq!(short_successor(b"global_step"), b"h");
        assert_eq!(short_successor(b"\xff\xffa"), b"\xff\xffb");
        assert_eq!(short_successor(b"\xff"), b"\xff");
    }

    #[test]
    fn an_empty_block_is_leveldbs() {
        // One restart point at 0, then the count 1.
        assert_eq!(
            BlockBuilder::new(16).finish(),
            [0, 0, 0, 0, 1, 0, 0, 0].to_vec()
        );
    }
}
