//! A native reader of TensorFlow's checkpoint format, the tensor bundle.
//!
//! A checkpoint `PREFIX` is `PREFIX.index`, an SSTable ([`table`]) mapping each tensor name to
//! a `BundleEntryProto` (dtype, shape, shard, offset, size, masked CRC32C; the empty key holds
//! the `BundleHeaderProto`), and the shards `PREFIX.data-0000S-of-0000N` holding the raw
//! little-endian tensor bytes. Every block of the index and every tensor read is checked
//! against its CRC. Tensors of every dtype tessel has a type for are read (bool, the signed
//! and unsigned integers, half, bfloat16, float32 and float64); any other dtype (string,
//! complex), a big-endian bundle, or a partitioned variable is an error naming the tensor.
//!
//! [`write_bundle`] writes a checkpoint TF reads (`writer`, with the index's SSTable from
//! `table_writer`).

mod in_model_dir;
mod proto;
mod table;
mod table_writer;
mod writer;

pub(crate) use in_model_dir::{existing_checkpoint, prefix_of_index};
pub(crate) use writer::remove_bundle;
pub use writer::write_bundle;

use prost::Message;
use proto::{dtype_name, element_type_of, BundleEntryProto, BundleHeaderProto};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TfBundleError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a readable TensorFlow checkpoint index: {message}")]
    Index { path: PathBuf, message: String },
    #[error("{path}: tensor `{name}`: {message}")]
    Data {
        path: PathBuf,
        name: String,
        message: String,
    },
    #[error("tensor `{name}` in {path} is {dtype}, which tessel has no element type for")]
    Dtype {
        path: PathBuf,
        name: String,
        dtype: String,
    },
    #[error("the TensorFlow checkpoint {prefix} has no tensor `{name}`")]
    NotFound { prefix: PathBuf, name: String },
    #[error("cannot write the TensorFlow checkpoint {prefix}: {message}")]
    Write { prefix: PathBuf, message: String },
}

/// What the index says of one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// TF's dtype name (`float32`, `int64`, ...).
    pub dtype: String,
    /// tessel's element type, when tessel reads this dtype.
    pub element_type: Option<ElementType>,
    pub dims: Vec<i64>,
}

/// An opened TF checkpoint: its index parsed; tensors are read on demand.
#[derive(Clone, Debug)]
pub struct TfBundle {
    prefix: PathBuf,
    num_shards: i32,
    /// (name, entry) in the index's (sorted) order.
    entries: Vec<(String, BundleEntryProto)>,
}

fn check_crc(computed: u32, stored: u32) -> Result<(), String> {
    if computed != stored {
        return Err(format!(
            "CRC32C mismatch (stored {stored:#010x}, computed {computed:#010x}): the file is corrupted"
        ));
    }
    Ok(())
}

/// TF's `MaskDelta` rotation: CRCs stored next to data they cover are masked.
pub(crate) fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// `PREFIX.index`.
pub(crate) fn index_path(prefix: &Path) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".index");
    PathBuf::from(s)
}

/// `PREFIX.data-0000S-of-0000N`.
pub(crate) fn data_path(prefix: &Path, shard: i32, num_shards: i32) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(format!(".data-{shard:05}-of-{num_shards:05}"));
    PathBuf::from(s)
}

impl TfBundle {
    /// Reads and checks `PREFIX.index` (the shards are read by [`TfBundle::read`]).
    pub fn open(prefix: impl Into<PathBuf>) -> Result<TfBundle, TfBundleError> {
        let prefix = prefix.into();
        let path = index_path(&prefix);
        let bytes = std::fs::read(&path).map_err(|source| TfBundleError::Io {
            path: path.clone(),
            source,
        })?;
        let index_err = |message: String| TfBundleError::Index {
            path: path.clone(),
            message,
        };
        let table = table::read_table(&bytes).map_err(index_err)?;
        let mut header = None;
        let mut entries = Vec::with_capacity(table.len());
        for (key, value) in table {
            if key.is_empty() {
                let h = BundleHeaderProto::decode(value.as_slice())
                    .map_err(|e| index_err(format!("bad BundleHeaderProto: {e}")))?;
                header = Some(h);
                continue;
            }
            let name = String::from_utf8(key)
                .map_err(|_| index_err("a tensor name is not UTF-8".into()))?;
            let entry = BundleEntryProto::decode(value.as_slice())
                .map_err(|e| index_err(format!("bad BundleEntryProto for tensor `{name}`: {e}")))?;
            entries.push((name, entry));
        }
        let header = header.ok_or_else(|| index_err("it has no header entry".into()))?;
        if header.endianness != 0 {
            return Err(index_err(
                "it was written big-endian; tessel reads little-endian checkpoints".into(),
            ));
        }
        if header.num_shards < 1 {
            return Err(index_err(format!(
                "its header says {} shards",
                header.num_shards
            )));
        }
        for (name, e) in &entries {
            if e.shard_id < 0 || e.shard_id >= header.num_shards || e.offset < 0 || e.size < 0 {
                return Err(index_err(format!(
                    "tensor `{name}` is at shard {} offset {} size {}, outside the {} shards",
                    e.shard_id, e.offset, e.size, header.num_shards
                )));
            }
        }
        Ok(TfBundle {
            prefix,
            num_shards: header.num_shards,
            entries,
        })
    }

    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// Every tensor's name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The dtype and shape of `name`, if the checkpoint has it.
    pub fn info(&self, name: &str) -> Option<TensorInfo> {
        let entry = self.entry(name)?;
        Some(TensorInfo {
            dtype: dtype_name(entry.dtype),
            element_type: element_type_of(entry.dtype),
            dims: entry
                .shape
                .as_ref()
                .map(|s| s.dim.iter().map(|d| d.size).collect())
                .unwrap_or_default(),
        })
    }

    fn entry(&self, name: &str) -> Option<&BundleEntryProto> {
        self.entries
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.entries[i].1)
    }

    /// Every tensor, in name order.
    pub fn read_all(&self) -> Result<Vec<(String, Array)>, TfBundleError> {
        self.names()
            .map(|name| Ok((name.to_string(), self.read(name)?)))
            .collect()
    }

    /// Reads one tensor from its shard, checking its size and CRC.
    pub fn read(&self, name: &str) -> Result<Array, TfBundleError> {
        let entry = self.entry(name).ok_or_else(|| TfBundleError::NotFound {
            prefix: self.prefix.clone(),
            name: name.to_string(),
        })?;
        let path = data_path(&self.prefix, entry.shard_id, self.num_shards);
        let data_err = |message: String| TfBundleError::Data {
            path: path.clone(),
            name: name.to_string(),
            message,
        };
        let Some(ty) = element_type_of(entry.dtype) else {
            return Err(TfBundleError::Dtype {
                path: index_path(&self.prefix),
                name: name.to_string(),
                dtype: dtype_name(entry.dtype),
            });
        };
        if !entry.slices.is_empty() {
            return Err(data_err(
                "it is a partitioned variable, which tessel does not read".into(),
            ));
        }
        let info = self.info(name).expect("entry exists");
        if info.dims.iter().any(|&d| d < 0) {
            return Err(data_err(format!("its shape {:?} is not static", info.dims)));
        }
        let elements = info
            .dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64));
        let expected = elements.and_then(|n| n.checked_mul(ty.byte_size() as u64));
        if expected != Some(entry.size as u64) {
            return Err(data_err(format!(
                "the index says {} bytes, but {} {:?} takes {}",
                entry.size,
                info.dtype,
                info.dims,
                expected.map_or("more than 2^64".to_string(), |n| n.to_string())
            )));
        }
        let bytes = self.entry_bytes(name, entry)?;
        check_crc(masked_crc32c(&bytes), entry.crc32c).map_err(data_err)?;
        let data = ArrayData::from_le_bytes(ty, &bytes)
            .ok_or_else(|| data_err("its bytes do not decode".into()))?;
        Ok(Array::new(ArrayShape::new(ty, &info.dims), data))
    }

    /// A scalar string tensor's bytes, such as `_CHECKPOINTABLE_OBJECT_GRAPH` (TF stores a
    /// string tensor as its varint lengths, their masked CRC32C, then the strings).
    pub fn read_scalar_string(&self, name: &str) -> Result<Vec<u8>, TfBundleError> {
        let entry = self.entry(name).ok_or_else(|| TfBundleError::NotFound {
            prefix: self.prefix.clone(),
            name: name.to_string(),
        })?;
        let path = data_path(&self.prefix, entry.shard_id, self.num_shards);
        let data_err = |message: &str| TfBundleError::Data {
            path: path.clone(),
            name: name.to_string(),
            message: message.to_string(),
        };
        const DT_STRING: i32 = 7;
        let scalar = entry.shape.as_ref().is_none_or(|s| s.dim.is_empty());
        if entry.dtype != DT_STRING || !scalar {
            return Err(data_err("it is not a scalar string"));
        }
        let bytes = self.entry_bytes(name, entry)?;
        let (mut len, mut used) = (0u64, 0usize);
        for (i, &b) in bytes.iter().enumerate().take(10) {
            len |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                used = i + 1;
                break;
            }
        }
        let start = used + 4;
        let end = (start as u64).checked_add(len);
        if used == 0 || end.is_none_or(|end| end > bytes.len() as u64) {
            return Err(data_err("its length prefix does not match its bytes"));
        }
        let value = &bytes[start..start + len as usize];
        // TF's CRC of a string tensor covers each length as 4 little-endian bytes, the
        // lengths' checksum, then the strings.
        let len32 = u32::try_from(len).map_err(|_| data_err("it is longer than 4 GiB"))?;
        let crc = crc32c::crc32c(&len32.to_le_bytes());
        let crc = crc32c::crc32c_append(crc, &bytes[used..start]);
        let crc = crc32c::crc32c_append(crc, value);
        let masked = crc.rotate_right(15).wrapping_add(0xa282_ead8);
        check_crc(masked, entry.crc32c).map_err(|m| data_err(&m))?;
        Ok(value.to_vec())
    }

    /// The bytes of one entry from its shard (the caller checks their CRC).
    fn entry_bytes(&self, name: &str, entry: &BundleEntryProto) -> Result<Vec<u8>, TfBundleError> {
        let path = data_path(&self.prefix, entry.shard_id, self.num_shards);
        let data_err = |message: String| TfBundleError::Data {
            path: path.clone(),
            name: name.to_string(),
            message,
        };
        let io = |source| TfBundleError::Io {
            path: path.clone(),
            source,
        };
        let mut file = std::fs::File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if (entry.offset as u64).saturating_add(entry.size as u64) > len {
            return Err(data_err(format!(
                "its bytes {}..{} run past the end of the file ({len} bytes)",
                entry.offset,
                entry.offset + entry.size
            )));
        }
        file.seek(SeekFrom::Start(entry.offset as u64))
            .map_err(io)?;
        let mut bytes = vec![0u8; entry.size as usize];
        file.read_exact(&mut bytes).map_err(io)?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_matches_leveldb() {
        // CRC-32C's check value, then LevelDB's masking: rotate right 15, add the delta
        // (unmasking is the inverse).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(masked_crc32c(b""), 0xa282_ead8);
        let crc = crc32c::crc32c(b"foo");
        let masked = masked_crc32c(b"foo");
        let rot = masked.wrapping_sub(0xa282_ead8);
        assert_eq!(rot.rotate_left(15), crc);
    }

    #[test]
    fn a_dtype_tessel_has_no_type_for_is_refused_naming_the_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model.ckpt-1");
        let header = BundleHeaderProto {
            num_shards: 1,
            ..Default::default()
        };
        let entry = BundleEntryProto {
            dtype: 7, // DT_STRING
            size: 0,
            ..Default::default()
        };
        let table = table_writer::write_table(&[
            (Vec::new(), header.encode_to_vec()),
            (b"vocab".to_vec(), entry.encode_to_vec()),
        ]);
        std::fs::write(index_path(&prefix), table).unwrap();
        std::fs::write(data_path(&prefix, 0, 1), b"").unwrap();
        let bundle = TfBundle::open(&prefix).unwrap();
        assert_eq!(bundle.info("vocab").unwrap().element_type, None);
        let e = bundle.read("vocab").unwrap_err();
        assert!(matches!(e, TfBundleError::Dtype { .. }), "{e}");
        let e = e.to_string();
        assert!(e.contains("`vocab`") && e.contains("string"), "{e}");
    }

    #[test]
    fn file_names_are_tfs() {
        let p = Path::new("/m/model.ckpt-300");
        assert_eq!(index_path(p), Path::new("/m/model.ckpt-300.index"));
        assert_eq!(
            data_path(p, 0, 1),
            Path::new("/m/model.ckpt-300.data-00000-of-00001")
        );
    }
}
