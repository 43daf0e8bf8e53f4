//! MNIST as bundled in the repository (`estimator/data/mnist/`, the original IDX `.gz`
//! files), checked against their well-known MD5 digests before use, so a damaged copy is an
//! error naming the file rather than a silently worse model. The examples and the tests that
//! run their input include this file (`#[path]`); the library has no data paths.
#![allow(dead_code)] // each includer uses part of it

use md5::{Digest, Md5};
use std::path::{Path, PathBuf};
use tessel_compiler::ir::Array;
use tessel_estimator::input::idx::read_idx;

/// The four files and their MD5 digests (as published with MNIST, and in `MD5SUMS`).
pub const FILES: [(&str, &str); 4] = [
    (
        "train-images-idx3-ubyte.gz",
        "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    ),
    (
        "train-labels-idx1-ubyte.gz",
        "d53e105ee54ea40749a09fcbcd1e9432",
    ),
    (
        "t10k-images-idx3-ubyte.gz",
        "9fb629c4189551a2d022fa330f9573f3",
    ),
    (
        "t10k-labels-idx1-ubyte.gz",
        "ec29112dd5afa0611ce80d1b7f02629c",
    ),
];

/// The bundled copy's directory.
pub fn bundled_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join("mnist")
}

/// One split: images `u8[N, 28, 28]` and labels `u8[N]`.
pub struct Split {
    pub images: Array,
    pub labels: Array,
}

/// Reads `train` (60,000) or `test` (10,000 images) from `dir`, after checking the MD5 of
/// both files.
pub fn load(dir: &Path, train: bool) -> Result<Split, String> {
    let (images, labels) = if train {
        (FILES[0], FILES[1])
    } else {
        (FILES[2], FILES[3])
    };
    let read = |(name, md5): (&str, &str)| -> Result<Array, String> {
        let path = dir.join(name);
        check_md5(&path, md5)?;
        read_idx(&path).map_err(|e| e.to_string())
    };
    Ok(Split {
        images: read(images)?,
        labels: read(labels)?,
    })
}

/// Fails unless the file's MD5 digest is `expected` (lowercase hex).
pub fn check_md5(path: &Path, expected: &str) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let digest = Md5::digest(&bytes);
    let got: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if got != expected {
        return Err(format!(
            "{} is damaged: its MD5 is {got}, expected {expected} (restore it from git or from MNIST's site)",
            path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_files_pass_and_a_damaged_one_fails() {
        let dir = bundled_dir();
        for (name, md5) in FILES {
            check_md5(&dir.join(name), md5).unwrap();
        }
        let tmp = std::env::temp_dir().join(format!("tessel-md5-{}", std::process::id()));
        std::fs::write(&tmp, b"not mnist").unwrap();
        let e = check_md5(&tmp, FILES[0].1).unwrap_err();
        assert!(e.contains("is damaged") && e.contains(FILES[0].1), "{e}");
        std::fs::remove_file(&tmp).ok();
    }
}
