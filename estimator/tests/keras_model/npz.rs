//! The `.npz` / `.npy` reader: dtypes, range checks, and clear errors for damaged files.

use tessel_compiler::ir::ArrayData;
use tessel_estimator::keras::npz::{parse_npy, parse_npz};

fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header.as_bytes());
    b.extend(data);
    b
}

#[test]
fn dtypes_are_read_and_narrowed() {
    let f8: Vec<u8> = [1.5f64, -2.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let a = parse_npy(&npy("<f8", "(2,)", &f8)).unwrap();
    assert_eq!(a.data, ArrayData::F32(vec![1.5, -2.0]));
    let i8s: Vec<u8> = [7i64, -3].iter().flat_map(|x| x.to_le_bytes()).collect();
    let a = parse_npy(&npy("<i8", "(1, 2)", &i8s)).unwrap();
    assert_eq!(a.data, ArrayData::S32(vec![7, -3]));
    assert_eq!(a.shape.dims.to_vec(), vec![1, 2]);
    let a = parse_npy(&npy("|u1", "(3,)", &[0, 200, 255])).unwrap();
    assert_eq!(a.data, ArrayData::S32(vec![0, 200, 255]));
    let a = parse_npy(&npy("|b1", "()", &[1])).unwrap();
    assert_eq!(a.data, ArrayData::S32(vec![1]));
}

#[test]
fn values_outside_32_bits_are_errors() {
    let big: Vec<u8> = (1i64 << 40).to_le_bytes().to_vec();
    let e = parse_npy(&npy("<i8", "(1,)", &big)).unwrap_err();
    assert!(e.contains("does not fit int32"), "{e}");
    let huge: Vec<u8> = 1e300f64.to_le_bytes().to_vec();
    let e = parse_npy(&npy("<f8", "(1,)", &huge)).unwrap_err();
    assert!(e.contains("outside float32's range"), "{e}");
}

#[test]
fn damaged_files_are_errors_not_panics() {
    let good = npy("<f4", "(4,)", &[0u8; 16]);
    for cut in 0..good.len() {
        assert!(parse_npy(&good[..cut]).is_err(), "cut at {cut}");
    }
    let e = parse_npy(&npy(">f4", "(1,)", &[0; 4])).unwrap_err();
    assert!(e.contains("not supported"), "{e}");
    let e = parse_npz(b"not a zip at all, just text", "x.npz").unwrap_err();
    assert!(e.to_string().contains("x.npz: not a zip archive"), "{e}");
}

#[test]
fn fixture_archives_truncated_anywhere_fail_cleanly() {
    let path = crate::common::fixture("keras3_mnist_cnn").join("io.npz");
    let bytes = std::fs::read(&path).unwrap();
    assert!(parse_npz(&bytes, "io.npz").unwrap().len() >= 4);
    for cut in (0..bytes.len()).step_by(97) {
        assert!(parse_npz(&bytes[..cut], "io.npz").is_err(), "cut at {cut}");
    }
}
