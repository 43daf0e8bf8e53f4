//! Host I/O: safetensors files to and from arrays.
//!
//! Every file [`write_safetensors`] writes is durable (`crate::durable`) and carries a CRC32C
//! of each tensor's bytes (the checksum TF's tensor bundles keep per tensor) in its metadata:
//! one entry, `"crc32c"`, whose value is a JSON object from tensor name to 8 hex digits,
//! sorted by name so that the same tensors always give the same bytes. [`read_safetensors`]
//! checks them and names the tensor whose bytes changed. Files without checksums (written by
//! other tools) are read as they are.

use crate::durable::write_durably;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum HostIoError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a safetensors file: {message}")]
    NotSafetensors { path: PathBuf, message: String },
    #[error("{path}: tensor \"{name}\" has dtype {dtype}, which tessel has no element type for")]
    UnsupportedDtype {
        path: PathBuf,
        name: String,
        dtype: String,
    },
    #[error("{path}: tensor \"{name}\" has {bytes} bytes, which is not a whole number of {ty} elements of shape {shape:?}")]
    BadLength {
        path: PathBuf,
        name: String,
        bytes: usize,
        ty: ElementType,
        shape: Vec<usize>,
    },
    #[error("cannot write {path}: {message}")]
    Write { path: PathBuf, message: String },
    /// A tensor whose bytes do not match the checksum written with them: the file was
    /// damaged after it was written.
    #[error("{path}: tensor \"{name}\" is corrupt: its bytes have CRC32C {actual:08x}, but the file recorded {expected:08x} when it was written")]
    Checksum {
        path: PathBuf,
        name: String,
        expected: u32,
        actual: u32,
    },
}

/// The metadata key of the tensors' checksums.
const CHECKSUM_KEY: &str = "crc32c";

fn element_type(dtype: Dtype) -> Option<ElementType> {
    Some(match dtype {
        Dtype::BOOL => ElementType::Pred,
        Dtype::U8 => ElementType::U8,
        Dtype::I8 => ElementType::S8,
        Dtype::I16 => ElementType::S16,
        Dtype::U16 => ElementType::U16,
        Dtype::F16 => ElementType::F16,
        Dtype::BF16 => ElementType::BF16,
        Dtype::I32 => ElementType::S32,
        Dtype::U32 => ElementType::U32,
        Dtype::F32 => ElementType::F32,
        Dtype::F64 => ElementType::F64,
        Dtype::I64 => ElementType::S64,
        Dtype::U64 => ElementType::U64,
        _ => return None,
    })
}

fn dtype(ty: ElementType) -> Dtype {
    match ty {
        ElementType::Pred => Dtype::BOOL,
        ElementType::U8 => Dtype::U8,
        ElementType::S8 => Dtype::I8,
        ElementType::S16 => Dtype::I16,
        ElementType::U16 => Dtype::U16,
        ElementType::F16 => Dtype::F16,
        ElementType::BF16 => Dtype::BF16,
        ElementType::S32 => Dtype::I32,
        ElementType::U32 => Dtype::U32,
        ElementType::F32 => Dtype::F32,
        ElementType::F64 => Dtype::F64,
        ElementType::S64 => Dtype::I64,
        ElementType::U64 => Dtype::U64,
    }
}

/// Reads every tensor of a safetensors file, keyed by its name in the file, in the order
/// the tensors are stored.
pub fn read_safetensors(path: impl AsRef<Path>) -> Result<Vec<(String, Array)>, HostIoError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| HostIoError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let not_safetensors = |message: String| HostIoError::NotSafetensors {
        path: path.to_path_buf(),
        message,
    };
    // The safetensors crate keeps the last of two entries with one name; an input file that
    // names a parameter twice is ambiguous, so it is refused.
    if let Some(name) = duplicate_name(&bytes) {
        return Err(not_safetensors(format!("tensor \"{name}\" appears twice")));
    }
    let st = SafeTensors::deserialize(&bytes).map_err(|e| not_safetensors(e.to_string()))?;
    let (_, metadata) =
        SafeTensors::read_metadata(&bytes).map_err(|e| not_safetensors(e.to_string()))?;
    let checksums = recorded_checksums(metadata.metadata().as_ref(), path)?;
    let mut tensors: Vec<(String, TensorView)> = st.tensors();
    tensors.sort_by_key(|(_, t)| t.data().as_ptr() as usize);
    tensors
        .into_iter()
        .map(|(name, t)| {
            let ty = element_type(t.dtype()).ok_or_else(|| HostIoError::UnsupportedDtype {
                path: path.to_path_buf(),
                name: name.clone(),
                dtype: format!("{:?}", t.dtype()),
            })?;
            if let Some(checksums) = &checksums {
                verify_checksum(checksums, path, &name, t.data())?;
            }
            let shape: Vec<usize> = t.shape().to_vec();
            let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            let array_shape = ArrayShape::new(ty, &dims);
            let data = ArrayData::from_le_bytes(ty, t.data())
                .filter(|d| d.len() as i64 == array_shape.element_count())
                .ok_or_else(|| HostIoError::BadLength {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    bytes: t.data().len(),
                    ty,
                    shape: shape.clone(),
                })?;
            Ok((name, Array::new(array_shape, data)))
        })
        .collect()
}

/// Writes arrays to a safetensors file under the given names.
pub fn write_safetensors(
    path: impl AsRef<Path>,
    tensors: &[(String, Array)],
) -> Result<(), HostIoError> {
    let path = path.as_ref();
    let write_err = |message: String| HostIoError::Write {
        path: path.to_path_buf(),
        message,
    };
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, a)| a.data.to_le_bytes()).collect();
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, a), b)| {
            let shape: Vec<usize> = a.shape.dims.iter().map(|&d| d.max(0) as usize).collect();
            TensorView::new(dtype(a.element_type()), shape, b)
                .map(|v| (name.clone(), v))
                .map_err(|e| write_err(format!("tensor \"{name}\": {e}")))
        })
        .collect::<Result<_, _>>()?;
    // One metadata entry: safetensors writes its metadata map in hash order, so one key per
    // tensor would make the bytes of equal files differ.
    let checksums: BTreeMap<&str, String> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, _), b)| (name.as_str(), format!("{:08x}", crc32c::crc32c(b))))
        .collect();
    let checksums = serde_json::to_string(&checksums).map_err(|e| write_err(e.to_string()))?;
    let metadata = HashMap::from([(CHECKSUM_KEY.to_string(), checksums)]);
    let file =
        safetensors::serialize(views, &Some(metadata)).map_err(|e| write_err(e.to_string()))?;
    write_durably(path, &file).map_err(|e| write_err(e.to_string()))
}

/// The checksums a file recorded, by tensor name; `None` for a file written without them.
fn recorded_checksums(
    metadata: Option<&HashMap<String, String>>,
    path: &Path,
) -> Result<Option<HashMap<String, u32>>, HostIoError> {
    let Some(text) = metadata.and_then(|m| m.get(CHECKSUM_KEY)) else {
        return Ok(None);
    };
    let bad = |message: String| HostIoError::NotSafetensors {
        path: path.to_path_buf(),
        message,
    };
    let recorded: HashMap<String, String> = serde_json::from_str(text)
        .map_err(|e| bad(format!("its checksums cannot be read ({e})")))?;
    let mut checksums = HashMap::new();
    for (name, value) in recorded {
        let crc = u32::from_str_radix(&value, 16).map_err(|_| {
            bad(format!(
                "the checksum of tensor \"{name}\" is \"{value}\", not 8 hex digits"
            ))
        })?;
        checksums.insert(name, crc);
    }
    Ok(Some(checksums))
}

/// Checks one tensor's bytes against its recorded checksum. In a file with checksums, a
/// tensor without one was added or renamed after the file was written.
fn verify_checksum(
    checksums: &HashMap<String, u32>,
    path: &Path,
    name: &str,
    data: &[u8],
) -> Result<(), HostIoError> {
    let actual = crc32c::crc32c(data);
    let Some(&expected) = checksums.get(name) else {
        return Err(HostIoError::NotSafetensors {
            path: path.to_path_buf(),
            message: format!(
                "tensor \"{name}\" has no checksum though the file's other tensors have one"
            ),
        });
    };
    if actual != expected {
        return Err(HostIoError::Checksum {
            path: path.to_path_buf(),
            name: name.to_string(),
            expected,
            actual,
        });
    }
    Ok(())
}

/// A tensor name that appears twice in the JSON header. Any other defect of the header is
/// left for the safetensors crate to report.
fn duplicate_name(bytes: &[u8]) -> Option<String> {
    use serde::de::{Deserializer, Error, IgnoredAny, MapAccess, Visitor};
    /// Walks the header's top-level keys and keeps the first one seen twice.
    struct UniqueKeys<'d>(&'d mut Option<String>);
    impl<'de> Visitor<'de> for UniqueKeys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object of tensors")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                if !seen.insert(key.clone()) {
                    *self.0 = Some(key);
                    return Err(A::Error::custom("duplicate"));
                }
            }
            Ok(())
        }
    }
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let header = bytes.get(8..8usize.checked_add(usize::try_from(n).ok()?)?)?;
    let mut duplicate = None;
    let _ =
        serde_json::Deserializer::from_slice(header).deserialize_map(UniqueKeys(&mut duplicate));
    duplicate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_element_type() {
        let dir = std::env::temp_dir().join(format!("tessel-host-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let tensors: Vec<(String, Array)> = ElementType::ALL
            .iter()
            .enumerate()
            .map(|(i, &ty)| {
                let shape = ArrayShape::new(ty, &[2, 3]);
                let data = ArrayData::from_f64_fn(ty, 6, |j| (j as f64) - 2.0 * (i % 2) as f64);
                (i.to_string(), Array::new(shape, data))
            })
            .collect();
        write_safetensors(&path, &tensors).unwrap();
        // The same tensors give the same bytes (checkpoints of equal runs are compared so).
        let again = dir.join("again.safetensors");
        write_safetensors(&again, &tensors).unwrap();
        assert!(std::fs::read(&path).unwrap() == std::fs::read(&again).unwrap());
        let mut back = read_safetensors(&path).unwrap();
        back.sort_by_key(|(k, _)| k.parse::<usize>().unwrap());
        assert_eq!(back, tensors);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn explains_a_file_that_is_not_safetensors() {
        let dir = std::env::temp_dir().join(format!("tessel-host-io-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.safetensors");
        std::fs::write(&path, b"HloModule not_a_tensor_file").unwrap();
        let e = read_safetensors(&path).unwrap_err();
        assert!(e.to_string().contains("is not a safetensors file"), "{e}");
        let missing = read_safetensors(dir.join("missing.safetensors")).unwrap_err();
        assert!(missing.to_string().contains("cannot read"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A flipped byte in a tensor's data is caught by its checksum, named by tensor; a file
    /// written without checksums (by another tool) still reads.
    #[test]
    fn checksums_catch_a_flipped_byte() {
        let dir = std::env::temp_dir().join(format!("tessel-host-io-crc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.safetensors");
        let tensor = |name: &str, v: f32| {
            (
                name.to_string(),
                Array::new(
                    ArrayShape::new(ElementType::F32, &[256]),
                    ArrayData::F32(vec![v; 256]),
                ),
            )
        };
        write_safetensors(
            &path,
            &[tensor("dense/kernel", 0.5), tensor("dense/bias", 1.5)],
        )
        .unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 100; // inside the last tensor's data
        bytes[at] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let e = read_safetensors(&path).unwrap_err();
        assert!(matches!(e, HostIoError::Checksum { .. }), "{e}");
        assert!(e.to_string().contains("c.safetensors"), "{e}");
        assert!(e.to_string().contains("is corrupt"), "{e}");

        let views = vec![(
            "x".to_string(),
            TensorView::new(Dtype::F32, vec![1], &[0, 0, 128, 63]).unwrap(),
        )];
        std::fs::write(&path, safetensors::serialize(views, &None).unwrap()).unwrap();
        let back = read_safetensors(&path).unwrap();
        assert_eq!(back[0].1.data.get_f64(0), 1.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file naming one tensor twice is refused (the second silently won before).
    #[test]
    fn refuses_a_tensor_name_given_twice() {
        let dir = std::env::temp_dir().join(format!("tessel-host-io-dup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dup.safetensors");
        let header = br#"{"0":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"0":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        file.extend_from_slice(&[0u8; 8]);
        std::fs::write(&path, &file).unwrap();
        let e = read_safetensors(&path).unwrap_err().to_string();
        assert!(e.contains("tensor \"0\" appears twice"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A write error reads as an OS error, not Rust's debug form, and leaves no file behind.
    #[test]
    fn write_errors_are_plain_and_leave_nothing() {
        let a = Array::new(
            ArrayShape::new(ElementType::F32, &[1]),
            ArrayData::F32(vec![1.0]),
        );
        let path = std::env::temp_dir().join("tessel-no-such-dir/x/out.safetensors");
        let e = write_safetensors(&path, &[("0".into(), a)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("No such file or directory"), "{e}");
        assert!(!e.contains("Os {"), "{e}");
    }
}
