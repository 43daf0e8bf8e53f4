//! TFRecord files end to end: round trips (plain, GZIP, ZLIB, many files), and every kind of
//! bad input with its exact error, plus property tests that random
//! bytes and mutated files never panic and that any single changed byte is detected.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use tessel_estimator::input::tfrecord::{
    Compression, ReaderOptions, RecordFileWriter, RecordFiles, RecordReader, RecordWriter,
};
use tessel_estimator::input::InputError;

fn write(path: &Path, records: &[&[u8]], compression: Compression) {
    let mut w = RecordFileWriter::create(path, compression).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    assert_eq!(w.commit().unwrap(), records.len() as u64);
}

fn read_all(path: &Path, options: &ReaderOptions) -> Result<Vec<Vec<u8>>, InputError> {
    RecordReader::open(path, options).unwrap().collect()
}

fn opts(compression: Compression) -> ReaderOptions {
    ReaderOptions {
        compression,
        ..Default::default()
    }
}

fn skipping() -> ReaderOptions {
    ReaderOptions {
        skip_corrupt: true,
        ..Default::default()
    }
}

/// Three records "abc", "defgh", "ij": at bytes 0, 19 and 40; 58 bytes in all.
fn three(dir: &Path) -> (PathBuf, Vec<u8>) {
    let p = dir.join("three.tfrecords");
    write(&p, &[b"abc", b"defgh", b"ij"], Compression::None);
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(bytes.len(), 58);
    (p, bytes)
}

#[test]
fn round_trips_plain_gzip_and_zlib() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..300u32)
        .map(|i| (0..(i * 7 % 1000)).map(|j| (i + j) as u8).collect())
        .collect();
    let refs: Vec<&[u8]> = records.iter().map(|r| &r[..]).collect();
    for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
        let p = dir.path().join(format!("r{}.tfrecords", c.tf_name()));
        write(&p, &refs, c);
        assert_eq!(read_all(&p, &opts(c)).unwrap(), records, "{c:?}");
        // A small read buffer reads the same records.
        let small = ReaderOptions {
            buffer_size: 7,
            ..opts(c)
        };
        assert_eq!(read_all(&p, &small).unwrap(), records, "{c:?}");
    }
    let gz = std::fs::read(dir.path().join("rGZIP.tfrecords")).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b], "a gzip stream");
}

#[test]
fn reads_a_file_list_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    let empty = dir.path().join("empty");
    write(&a, &[b"1", b"2"], Compression::None);
    write(&b, &[b"3"], Compression::None);
    write(&empty, &[], Compression::None);
    let got: Vec<Vec<u8>> = RecordFiles::new([&a, &empty, &b], ReaderOptions::default())
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got, vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]);
}

#[test]
fn writer_frames_into_any_write() {
    let mut w = RecordWriter::new(Vec::new(), Compression::None);
    w.write_record(b"abc").unwrap();
    let bytes = w.finish().unwrap();
    let got: Vec<_> =
        RecordReader::from_reader("mem", std::io::Cursor::new(bytes), &Default::default())
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(got, vec![b"abc".to_vec()]);
}

#[test]
fn an_uncommitted_file_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.tfrecords");
    let mut w = RecordFileWriter::create(&p, Compression::None).unwrap();
    w.write(b"abc").unwrap();
    drop(w);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn empty_file_has_no_records() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty");
    std::fs::write(&p, b"").unwrap();
    assert_eq!(read_all(&p, &ReaderOptions::default()).unwrap().len(), 0);
}

#[test]
fn truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let (p, bytes) = three(dir.path());
    std::fs::write(&p, &bytes[..56]).unwrap();
    let e = read_all(&p, &ReaderOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: record 2 at byte 40: truncated record: length 2 needs 6 bytes after the header, only 4 remain",
            p.display()
        )
    );
    std::fs::write(&p, &bytes[..45]).unwrap();
    let e = read_all(&p, &ReaderOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: record 2 at byte 40: truncated header: 5 of 12 bytes",
            p.display()
        )
    );
}

#[test]
fn flipped_byte_in_a_length() {
    let dir = tempfile::tempdir().unwrap();
    let (p, mut bytes) = three(dir.path());
    bytes[19] ^= 0x01;
    std::fs::write(&p, &bytes).unwrap();
    let e = read_all(&p, &ReaderOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: record 1 at byte 19: corrupt length: the length's CRC does not match \
             (the rest of the file cannot be framed)",
            p.display()
        )
    );
    // Skipping gives up the rest of this file (nothing after a bad length can be framed),
    // counts one skipped record, and goes on with the next file.
    let next = dir.path().join("next");
    write(&next, &[b"z"], Compression::None);
    let mut files = RecordFiles::new([&p, &next], skipping());
    let got: Vec<Vec<u8>> = files.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(got, vec![b"abc".to_vec(), b"z".to_vec()]);
    assert_eq!(files.skipped_count(), 1);
}

#[test]
fn flipped_byte_in_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let (p, mut bytes) = three(dir.path());
    bytes[19 + 12 + 2] ^= 0x80;
    std::fs::write(&p, &bytes).unwrap();
    let e = read_all(&p, &ReaderOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: record 1 at byte 19: corrupt data: the CRC of 5 bytes does not match",
            p.display()
        )
    );
    // The framing is intact: skipping drops only that record, and says so.
    let mut r = RecordReader::open(&p, &skipping()).unwrap();
    let got: Vec<Vec<u8>> = r.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(got, vec![b"abc".to_vec(), b"ij".to_vec()]);
    assert_eq!(r.skipped().len(), 1);
    assert_eq!(r.skipped()[0].to_string(), e.to_string());
    // Without CRC checks the changed byte is read as it is.
    let unchecked = ReaderOptions {
        check_crc: false,
        ..Default::default()
    };
    assert_eq!(read_all(&p, &unchecked).unwrap()[1], b"de\xe6gh".to_vec());
}

#[test]
fn a_file_that_is_not_tfrecord() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("notes.txt");
    std::fs::write(&p, "this is a text file, not TFRecords\n").unwrap();
    let e = read_all(&p, &ReaderOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: record 0 at byte 0: corrupt length: the length's CRC does not match \
             (the rest of the file cannot be framed)",
            p.display()
        )
    );
    // A plain file read as GZIP.
    let e = read_all(&p, &opts(Compression::Gzip)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: record 0 at byte 0 of the decompressed stream: cannot decompress: invalid gzip header",
            p.display()
        )
    );
}

#[test]
fn a_missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("absent");
    let mut files = RecordFiles::new([&p], skipping());
    let e = files.next().unwrap().unwrap_err();
    assert!(matches!(e, InputError::Io { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!("{}: ", p.display())),
        "{e}"
    );
    assert!(files.next().is_none());
}

#[test]
fn unknown_compression_names_the_choices() {
    assert_eq!(
        Compression::from_tf_name("gz").unwrap_err().to_string(),
        "unknown compression type \"gz\": expected \"\", \"GZIP\" or \"ZLIB\""
    );
    assert_eq!(
        Compression::from_tf_name("ZLIB").unwrap(),
        Compression::Zlib
    );
}

fn valid_file(records: &[Vec<u8>]) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), Compression::None);
    for r in records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap()
}

fn read_bytes(bytes: Vec<u8>, options: &ReaderOptions) -> Vec<Result<Vec<u8>, InputError>> {
    RecordReader::from_reader("mem", std::io::Cursor::new(bytes), options).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
            for check_crc in [true, false] {
                for skip_corrupt in [true, false] {
                    let o = ReaderOptions { compression: c, check_crc, skip_corrupt, ..Default::default() };
                    let _ = read_bytes(bytes.clone(), &o);
                }
            }
        }
    }

    #[test]
    fn any_changed_byte_is_detected(
        records in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..5),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let mut bytes = valid_file(&records);
        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        let out = read_bytes(bytes.clone(), &ReaderOptions::default());
        prop_assert!(out.iter().any(|r| r.is_err()), "change at {} not detected", i);
        let _ = read_bytes(bytes, &skipping());
    }

    #[test]
    fn any_truncation_is_detected(
        records in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..5),
        at in any::<prop::sample::Index>(),
    ) {
        let bytes = valid_file(&records);
        let cut = at.index(bytes.len());
        let out = read_bytes(bytes[..cut].to_vec(), &ReaderOptions::default());
        // A cut on a record boundary is a shorter valid file; anywhere else it is an error.
        let boundary = out.iter().all(|r| r.is_ok());
        if boundary {
            prop_assert_eq!(out.len(), valid_file_boundaries(&records).iter().position(|&b| b == cut).unwrap());
        }
    }
}

/// The byte offset where each record starts, and the end.
fn valid_file_boundaries(records: &[Vec<u8>]) -> Vec<usize> {
    let mut at = vec![0];
    for r in records {
        at.push(at.last().unwrap() + 16 + r.len());
    }
    at
}

#[test]
fn truncated_gzip_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.tfrecords.gz");
    let records: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 100]).collect();
    let refs: Vec<&[u8]> = records.iter().map(|r| &r[..]).collect();
    write(&p, &refs, Compression::Gzip);
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
    let out: Vec<_> = RecordReader::open(&p, &opts(Compression::Gzip))
        .unwrap()
        .collect();
    let e = out.last().unwrap().as_ref().unwrap_err();
    let prefix = format!("{}: record ", p.display());
    let s = e.to_string();
    assert!(
        s.starts_with(&prefix) && s.contains(" of the decompressed stream: "),
        "{s}"
    );
    assert!(out[..out.len() - 1].iter().all(|r| r.is_ok()));
}
