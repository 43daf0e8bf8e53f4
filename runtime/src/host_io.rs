//! Host I/O: safetensors files to and from arrays.

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
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
}

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
    let file = safetensors::serialize(views, &None).map_err(|e| write_err(e.to_string()))?;
    write_atomically(path, &file).map_err(|e| write_err(e.to_string()))
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`, so a failed
/// write never leaves a truncated file where a complete one was expected.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        std::fs::remove_file(&tmp).ok();
    }
    result
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
