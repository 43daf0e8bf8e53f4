//! A helper for `tests/tf/check_tfrecords.py` (the TensorFlow cross-check):
//! - `records_tool dump FILE OUT` reads an MNIST TFRecord file with tessel (RecordReader,
//!   parse_single_example, decode_raw) and writes `OUT.images` (u8, 784 per example),
//!   `OUT.labels` (s32 little endian) and `OUT.shape` (height width depth per example, s32);
//! - `records_tool events DIR` writes an event file of scalars `loss` = 1/(step+1) and
//!   `learning_rate` = 0.05 at steps 0, 10, ..., 90 and prints its path.

use std::io::Write;
use tessel_compiler::ir::ArrayData;
use tessel_estimator::input::parse::{
    decode_raw, parse_single_example_at, FeatureDType, ParseSpec, RawType,
};
use tessel_estimator::input::tfrecord::{ReaderOptions, RecordReader};
use tessel_estimator::input::Value;
use tessel_estimator::summary::EventWriter;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["dump", file, out] => dump(file, out),
        ["events", dir] => {
            let mut w = EventWriter::create(dir)?;
            for step in (0..100).step_by(10) {
                w.scalars(
                    step,
                    &[("loss", 1.0 / (step as f32 + 1.0)), ("learning_rate", 0.05)],
                )?;
            }
            println!("{}", w.path().display());
            Ok(())
        }
        _ => Err("usage: records_tool dump FILE OUT | records_tool events DIR".into()),
    }
}

fn dump(file: &str, out: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut spec = ParseSpec::new().fixed("image_raw", &[], FeatureDType::String)?;
    for name in ["label", "height", "width", "depth"] {
        spec = spec.fixed(name, &[], FeatureDType::Int64)?;
    }
    let (mut images, mut labels, mut shapes) = (Vec::new(), Vec::new(), Vec::new());
    let mut reader = RecordReader::open(file, &ReaderOptions::default())?;
    let mut buf = Vec::new();
    while reader.read_into(&mut buf)? {
        let e = parse_single_example_at(&buf, &spec, &reader.last_record().unwrap())?;
        let Value::Bytes { items, .. } = &e.values[0] else {
            unreachable!()
        };
        let ArrayData::U8(px) = decode_raw(&items[0], RawType::U8, true)?.data else {
            unreachable!()
        };
        images.extend(px);
        for (i, v) in e.values[1..].iter().enumerate() {
            let Value::Dense(a) = v else { unreachable!() };
            let x = a.data.get_i64(0) as i32;
            if i == 0 {
                labels.extend(x.to_le_bytes())
            } else {
                shapes.extend(x.to_le_bytes())
            }
        }
    }
    std::fs::File::create(format!("{out}.images"))?.write_all(&images)?;
    std::fs::File::create(format!("{out}.labels"))?.write_all(&labels)?;
    std::fs::File::create(format!("{out}.shape"))?.write_all(&shapes)?;
    Ok(())
}
