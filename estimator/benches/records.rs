//! Reading MNIST's `train.tfrecords` (60000 records): read, `parse_single_example`,
//! `decode_raw`, normalize to f32 in [-0.5, 0.5) and batch 128 (the guide's input_fn), on 1
//! thread and with a reader + 2 workers; prints examples/s and the cost of one batch. A
//! benchmark, not a timed test.
//!
//! ```text
//! cargo run --release -p tessel -- data convert-mnist estimator/data/mnist /tmp/mnist_records
//! cargo bench -p tessel-estimator --bench records -- /tmp/mnist_records/train.tfrecords
//! ```
//!
//! tf.data doing the same work, in the same sitting (the last argument is the threads, 1 or 2):
//!
//! ```text
//! /tmp/tf/bin/python -c "import sys,time,os;os.environ['TF_CPP_MIN_LOG_LEVEL']='2';import tensorflow as tf;T=int(sys.argv[2]);s={'image_raw':tf.io.FixedLenFeature([],tf.string),'label':tf.io.FixedLenFeature([],tf.int64)};f=lambda r:(lambda e:(tf.cast(tf.io.decode_raw(e['image_raw'],tf.uint8),tf.float32)*(1/255)-0.5,tf.cast(e['label'],tf.int32)))(tf.io.parse_single_example(r,s));o=tf.data.Options();o.threading.private_threadpool_size=T;o.threading.max_intra_op_parallelism=1;ds=tf.data.TFRecordDataset(sys.argv[1]).map(f,num_parallel_calls=None if T==1 else T,deterministic=True).batch(128,drop_remainder=True).with_options(o);[0 for _ in ds];t=time.perf_counter();n=sum(int(x.shape[0]) for x,_ in ds);d=time.perf_counter()-t;print(f'tf.data {T} thread(s): {n/d:.0f} examples/s, {d/(n/128)*1e3:.3f} ms/batch')" /tmp/mnist_records/train.tfrecords 1
//! ```

use std::sync::mpsc;
use std::time::Instant;
use tessel_compiler::ir::ArrayData;
use tessel_estimator::input::parse::{parse_single_example_at, FeatureDType, ParseSpec};
use tessel_estimator::input::tfrecord::{ReaderOptions, RecordReader};
use tessel_estimator::input::{InputError, Value};

const BATCH: usize = 128;
const PIXELS: usize = 784;

fn spec() -> ParseSpec {
    ParseSpec::new()
        .fixed("image_raw", &[], FeatureDType::String)
        .and_then(|s| s.fixed("label", &[], FeatureDType::Int64))
        .expect("a valid spec")
}

/// Parses `records` into one batch: images f32 `[n, 784]` in [-0.5, 0.5), labels s32.
fn fill_batch(
    records: &[Vec<u8>],
    spec: &ParseSpec,
    images: &mut [f32],
    labels: &mut [i32],
) -> Result<(), InputError> {
    for (i, r) in records.iter().enumerate() {
        let e = parse_single_example_at(r, spec, &Default::default())?;
        let (Value::Bytes { items, .. }, Value::Dense(label)) = (&e.values[0], &e.values[1]) else {
            unreachable!("the spec's types")
        };
        // decode_raw(u8), cast and scale fused: the bytes are the pixels.
        let px = &items[0];
        assert_eq!(px.len(), PIXELS);
        for (o, &p) in images[i * PIXELS..(i + 1) * PIXELS].iter_mut().zip(px) {
            *o = p as f32 * (1.0 / 255.0) - 0.5;
        }
        let ArrayData::S32(l) = &label.data else {
            unreachable!()
        };
        labels[i] = l[0];
    }
    Ok(())
}

/// Reads chunks of `BATCH` records (dropping the remainder) and hands each to `f`.
fn read_chunks(path: &str, mut f: impl FnMut(Vec<Vec<u8>>)) -> usize {
    let mut reader = RecordReader::open(path, &ReaderOptions::default()).expect("open");
    let mut n = 0;
    loop {
        let chunk: Vec<Vec<u8>> = reader
            .by_ref()
            .take(BATCH)
            .map(|r| r.expect("record"))
            .collect();
        if chunk.len() < BATCH {
            return n;
        }
        n += chunk.len();
        f(chunk);
    }
}

fn one_thread(path: &str) -> (usize, f64) {
    let spec = spec();
    let mut images = vec![0f32; BATCH * PIXELS];
    let mut labels = vec![0i32; BATCH];
    let t = Instant::now();
    let n = read_chunks(path, |chunk| {
        fill_batch(&chunk, &spec, &mut images, &mut labels).expect("parse")
    });
    (n, t.elapsed().as_secs_f64())
}

/// The reader feeds chunks of 128 records round-robin to `workers` threads that parse and batch.
fn threads(path: &str, workers: usize) -> (usize, f64) {
    let spec = spec();
    let t = Instant::now();
    let n = std::thread::scope(|s| {
        let mut senders = Vec::new();
        for _ in 0..workers {
            let (tx, rx) = mpsc::sync_channel::<Vec<Vec<u8>>>(4);
            senders.push(tx);
            let spec = &spec;
            s.spawn(move || {
                let mut images = vec![0f32; BATCH * PIXELS];
                let mut labels = vec![0i32; BATCH];
                for chunk in rx {
                    fill_batch(&chunk, spec, &mut images, &mut labels).expect("parse");
                }
            });
        }
        let mut next = 0;
        let n = read_chunks(path, |chunk| {
            senders[next % workers].send(chunk).expect("worker alive");
            next += 1;
        });
        drop(senders);
        n
    });
    (n, t.elapsed().as_secs_f64())
}

fn main() {
    let Some(path) = std::env::args().skip(1).find(|a| !a.starts_with('-')) else {
        println!("records bench: pass the path of MNIST's train.tfrecords (see the doc comment); skipped");
        return;
    };
    let t = Instant::now();
    let read = RecordReader::open(&path, &ReaderOptions::default())
        .expect("open")
        .count();
    let dt = t.elapsed().as_secs_f64();
    println!(
        "read only: {read} records in {dt:.3} s, {:.0} records/s",
        read as f64 / dt
    );
    for run in 0..3 {
        let (n, dt) = one_thread(&path);
        println!(
            "run {run}, 1 thread: {n} examples in {dt:.3} s, {:.0} examples/s, {:.3} ms per batch of {BATCH}",
            n as f64 / dt,
            dt / (n / BATCH) as f64 * 1e3
        );
        let (n, dt) = threads(&path, 2);
        println!(
            "run {run}, reader + 2 workers: {n} examples in {dt:.3} s, {:.0} examples/s, {:.3} ms per batch",
            n as f64 / dt,
            dt / (n / BATCH) as f64 * 1e3
        );
    }
}
