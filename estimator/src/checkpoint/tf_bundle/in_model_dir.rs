//! How a checkpoint prefix in a model_dir resolves to a file when it may be tessel's
//! (`PREFIX.safetensors`) or TF's (`PREFIX.index` with its data file).

use super::index_path;
use std::path::{Path, PathBuf};

/// The file of checkpoint `prefix`: `safetensors` when it exists, else TF's `PREFIX.index`
/// when that exists, else `safetensors` (which the caller reports missing).
pub(crate) fn existing_checkpoint(prefix: &Path, safetensors: PathBuf) -> PathBuf {
    if safetensors.exists() {
        return safetensors;
    }
    let index = index_path(prefix);
    if index.is_file() {
        index
    } else {
        safetensors
    }
}

/// The prefix of a TF checkpoint's `.index` file; `None` for any other file.
pub(crate) fn prefix_of_index(file: &Path) -> Option<PathBuf> {
    let name = file.file_name()?.to_str()?;
    let stem = name.strip_suffix(".index")?;
    (!stem.is_empty()).then(|| file.with_file_name(stem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tessels_file_first_then_tfs_index() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model.ckpt-5");
        let st = dir.path().join("model.ckpt-5.safetensors");
        assert_eq!(existing_checkpoint(&prefix, st.clone()), st);
        std::fs::write(dir.path().join("model.ckpt-5.index"), b"").unwrap();
        assert_eq!(
            existing_checkpoint(&prefix, st.clone()),
            dir.path().join("model.ckpt-5.index")
        );
        std::fs::write(&st, b"").unwrap();
        assert_eq!(existing_checkpoint(&prefix, st.clone()), st);
    }

    #[test]
    fn index_files_name_their_prefix() {
        assert_eq!(
            prefix_of_index(Path::new("/m/model.ckpt-3.index")),
            Some(PathBuf::from("/m/model.ckpt-3"))
        );
        assert_eq!(
            prefix_of_index(Path::new("/m/model.ckpt-3.safetensors")),
            None
        );
        assert_eq!(prefix_of_index(Path::new("/m/.index")), None);
    }
}
