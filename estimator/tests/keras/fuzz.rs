//! Mutated and truncated fixture bytes never panic the readers (they may read or fail).

use crate::fixtures::{h5py_file, model_file, walk};
use proptest::prelude::*;
use tessel_estimator::keras::file::read_keras_file;
use tessel_estimator::keras::hdf5::Hdf5File;

fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
    for &(at, value) in edits {
        let len = bytes.len();
        bytes[at % len] = value;
    }
    if let Some(cut) = cut {
        bytes.truncate(cut % (bytes.len() + 1));
    }
    bytes
}

fn read_all(bytes: Vec<u8>) {
    if let Ok(file) = Hdf5File::from_bytes("fuzzed.h5".into(), bytes) {
        if let Ok(root) = file.root() {
            let _ = walk(&root);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn mutated_h5py_files_never_panic(
        which in 0usize..4,
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..12),
        cut in prop::option::of(any::<usize>()),
    ) {
        let name = ["compact.h5", "chunked_gzip_shuffle.h5", "nested_groups.h5", "libver_latest.h5"][which];
        let bytes = std::fs::read(h5py_file(name)).expect("fixture");
        read_all(mutate(bytes, &edits, cut));
    }

    #[test]
    fn mutated_keras_model_files_never_panic(
        which in 0usize..3,
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..12),
        cut in prop::option::of(any::<usize>()),
    ) {
        let (model, file) = [("bn_mlp", "tf.h5"), ("nested_sequential", "tf.h5"), ("resnet_block", "tf.h5")][which];
        let bytes = std::fs::read(model_file(model, file)).expect("fixture");
        let bytes = mutate(bytes, &edits, cut);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fuzzed.h5");
        std::fs::write(&path, &bytes).expect("writes");
        let _ = read_keras_file(&path);
        read_all(bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn mutated_keras_zips_never_panic(
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in prop::option::of(any::<usize>()),
    ) {
        let bytes = std::fs::read(model_file("bn_mlp", "keras3.keras")).expect("fixture");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fuzzed.keras");
        std::fs::write(&path, mutate(bytes, &edits, cut)).expect("writes");
        let _ = read_keras_file(&path);
    }
}
