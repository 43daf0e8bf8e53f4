//! Writing a checkpoint in TF's tensor bundle format, as TF's `BundleWriter` writes one
//! shard: `PREFIX.data-00000-of-00001` holds the tensors' little-endian bytes back to back (in
//! name order), and `PREFIX.index` maps each name to its `BundleEntryProto` (dtype, shape,
//! offset, size, masked CRC32C of the bytes), the empty key to the `BundleHeaderProto` (one
//! shard, little endian, bundle version 1).
//!
//! Both files are written under temporary names and renamed, the data file first: TF and
//! tessel take a checkpoint to exist when its `.index` does, so a crash never leaves an index
//! naming missing or partial data.

use super::proto::{
    dtype_of, BundleEntryProto, BundleHeaderProto, Dim, TensorShapeProto, VersionDef,
};
use super::table_writer::write_table;
use super::{data_path, index_path, masked_crc32c, TfBundleError};
use prost::Message;
use std::path::Path;
use tessel_compiler::ir::Array;

/// TF's `kTensorBundleVersion`: the producer version written in the header.
const BUNDLE_VERSION: i32 = 1;

/// Writes `tensors` as the TF checkpoint `prefix` (`PREFIX.index` and
/// `PREFIX.data-00000-of-00001`). Names must be unique and non-empty (the empty key is the
/// header's).
pub fn write_bundle(prefix: &Path, tensors: &[(String, Array)]) -> Result<(), TfBundleError> {
    let write_err = |message: String| TfBundleError::Write {
        prefix: prefix.to_path_buf(),
        message,
    };
    let mut sorted: Vec<&(String, Array)> = tensors.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    if sorted.first().is_some_and(|(name, _)| name.is_empty()) {
        return Err(write_err("a tensor has an empty name".into()));
    }
    if let Some(pair) = sorted.windows(2).find(|p| p[0].0 == p[1].0) {
        return Err(write_err(format!("two tensors are named `{}`", pair[0].0)));
    }

    let mut data = Vec::new();
    let mut index = Vec::with_capacity(sorted.len() + 1);
    let header = BundleHeaderProto {
        num_shards: 1,
        endianness: 0,
        version: Some(VersionDef {
            producer: BUNDLE_VERSION,
            min_consumer: 0,
            bad_consumers: Vec::new(),
        }),
    };
    index.push((Vec::new(), header.encode_to_vec()));
    for (name, array) in sorted {
        let bytes = array.data.to_le_bytes();
        let entry = BundleEntryProto {
            dtype: dtype_of(array.element_type()),
            shape: Some(TensorShapeProto {
                dim: array
                    .shape
                    .dims
                    .iter()
                    .map(|&size| Dim {
                        size,
                        name: String::new(),
                    })
                    .collect(),
                unknown_rank: false,
            }),
            shard_id: 0,
            offset: data.len() as i64,
            size: bytes.len() as i64,
            crc32c: masked_crc32c(&bytes),
            slices: Vec::new(),
        };
        data.extend(bytes);
        index.push((name.as_bytes().to_vec(), entry.encode_to_vec()));
    }

    let data_file = data_path(prefix, 0, 1);
    let index_file = index_path(prefix);
    write_atomically(&data_file, &data)?;
    write_atomically(&index_file, &write_table(&index))
}

/// Removes the checkpoint `prefix`'s files (index first, so no index outlives its data). A
/// file already gone is not an error.
pub(crate) fn remove_bundle(prefix: &Path) -> Result<(), TfBundleError> {
    for path in [index_path(prefix), data_path(prefix, 0, 1)] {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(TfBundleError::Io { path, source }),
        }
    }
    Ok(())
}

/// Written durably (`tessel_runtime::durable`): a synced temporary renamed into place, then
/// the directory synced, as tessel's own checkpoints are.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), TfBundleError> {
    tessel_runtime::durable::write_durably(path, bytes).map_err(|source| TfBundleError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::super::TfBundle;
    use super::*;
    use tessel_compiler::ir::{ArrayData, ArrayShape, ElementType};

    fn array(data: ArrayData, dims: &[i64]) -> Array {
        Array::new(ArrayShape::new(data.element_type(), dims), data)
    }

    /// One tensor of every element type, with values at the edges of each type.
    fn every_dtype() -> Vec<(String, Array)> {
        // Half-precision values by their bits: 1.5 and the largest f16; -2.25 and the
        // lowest bf16.
        let half = |ty, bits: [u16; 2]| {
            let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
            ArrayData::from_le_bytes(ty, &bytes).unwrap()
        };
        vec![
            (
                "a/pred".into(),
                array(ArrayData::Pred(vec![true, false, true]), &[3]),
            ),
            (
                "a/s8".into(),
                array(ArrayData::S8(vec![i8::MIN, -1, 0, i8::MAX]), &[2, 2]),
            ),
            ("a/u8".into(), array(ArrayData::U8(vec![0, 1, 255]), &[3])),
            (
                "a/s16".into(),
                array(ArrayData::S16(vec![i16::MIN, 7, i16::MAX]), &[3]),
            ),
            (
                "a/u16".into(),
                array(ArrayData::U16(vec![0, u16::MAX]), &[2]),
            ),
            (
                "b/s32".into(),
                array(ArrayData::S32(vec![i32::MIN, -5, i32::MAX]), &[3, 1]),
            ),
            (
                "b/u32".into(),
                array(ArrayData::U32(vec![u32::MAX, 3]), &[2]),
            ),
            (
                "b/u64".into(),
                array(ArrayData::U64(vec![u64::MAX, 0]), &[2]),
            ),
            (
                "b/f16".into(),
                array(half(ElementType::F16, [0x3e00, 0x7bff]), &[2]),
            ),
            (
                "b/bf16".into(),
                array(half(ElementType::BF16, [0xc010, 0xff7f]), &[2]),
            ),
            (
                "dense/kernel".into(),
                array(
                    ArrayData::F32(vec![0.1, -0.0, f32::NAN, f32::INFINITY, 1e-40, 3.5]),
                    &[2, 3],
                ),
            ),
            (
                "dense/bias/Momentum".into(),
                array(ArrayData::F32(vec![]), &[0, 4]),
            ),
            (
                "extra/wide".into(),
                array(ArrayData::F64(vec![std::f64::consts::PI, -1e300]), &[2]),
            ),
            (
                "global_step".into(),
                array(ArrayData::S64(vec![i64::MAX]), &[]),
            ),
            (
                "input_pipeline/batches".into(),
                array(ArrayData::S64(vec![1234]), &[]),
            ),
        ]
    }

    #[test]
    fn every_dtype_round_trips_bitwise_through_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model.ckpt-12");
        let tensors = every_dtype();
        assert_eq!(
            tensors
                .iter()
                .map(|(_, a)| a.element_type())
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            ElementType::ALL.len(),
            "the test covers every element type"
        );
        write_bundle(&prefix, &tensors).unwrap();
        let bundle = TfBundle::open(&prefix).unwrap();
        let mut names: Vec<&str> = tensors.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        assert_eq!(bundle.names().collect::<Vec<_>>(), names);
        for (name, a) in &tensors {
            let info = bundle.info(name).unwrap();
            assert_eq!(info.element_type, Some(a.element_type()), "{name}");
            assert_eq!(info.dims, a.shape.dims.to_vec(), "{name}");
            let b = bundle.read(name).unwrap();
            assert_eq!(b.shape, a.shape, "{name}");
            // Bitwise: NaN and -0.0 included.
            assert_eq!(b.data.to_le_bytes(), a.data.to_le_bytes(), "{name}");
        }
        assert_eq!(bundle.info("global_step").unwrap().dtype, "int64");
        assert_eq!(bundle.info("b/bf16").unwrap().dtype, "bfloat16");
        // Only the two files, no temporaries.
        let mut files: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            ["model.ckpt-12.data-00000-of-00001", "model.ckpt-12.index"]
        );
        remove_bundle(&prefix).unwrap();
        remove_bundle(&prefix).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_flipped_data_byte_is_caught_by_the_crc() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model.ckpt-1");
        write_bundle(&prefix, &every_dtype()).unwrap();
        let data = data_path(&prefix, 0, 1);
        let mut bytes = std::fs::read(&data).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&data, bytes).unwrap();
        let bundle = TfBundle::open(&prefix).unwrap();
        // The last tensor in name order holds the last byte.
        let e = bundle
            .read("input_pipeline/batches")
            .unwrap_err()
            .to_string();
        assert!(e.contains("CRC32C mismatch"), "{e}");
        assert!(bundle.read("global_step").is_ok());
    }

    #[test]
    fn duplicate_and_empty_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("m");
        let x = array(ArrayData::S32(vec![1]), &[1]);
        let e = write_bundle(&prefix, &[("v".into(), x.clone()), ("v".into(), x.clone())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("two tensors are named `v`"), "{e}");
        let e = write_bundle(&prefix, &[("".into(), x)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("empty name"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
