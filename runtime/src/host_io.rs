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
    let st = SafeTensors::deserialize(&bytes).map_err(|e| HostIoError::NotSafetensors {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
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
    safetensors::serialize_to_file(views, &None, path).map_err(|e| write_err(e.to_string()))
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
}
