//! The guide's training input pipeline on MNIST-sized data (60000 u8 [28, 28] images and s32
//! labels, synthetic so the benchmark needs no files): from_tensor_slices -> map (cast to f32,
//! /255 - 0.5) -> cache -> repeat -> batch(128, drop_remainder) -> prefetch(4), as
//! the guide's input_fn in `estimator/examples/mnist.rs` (which, like TF's, does not shuffle). Prints examples/s
//! and µs per batch for the first epoch (the map runs) and the cached epochs after it, on 1
//! thread (everything on the caller), 2 (the pipeline on the prefetch thread) and 3 (two map
//! workers and the prefetch thread); the same through the infeed source; and what resuming at
//! step 2000 costs.
//!
//! `cargo bench -p tessel-estimator --bench dataset`

use std::time::Instant;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};
use tessel_estimator::estimator::infeed::infeed_source;
use tessel_estimator::input::dataset::rng::SplitMix64;
use tessel_estimator::input::{Dataset, DatasetError, Element, ElementSpec, Value, ValueSpec};

const N: usize = 60000;
const BATCH: u64 = 128;
const BATCHES_PER_EPOCH: usize = N / BATCH as usize;

fn mnist_like() -> Dataset {
    let mut rng = SplitMix64::new(1);
    let images: Vec<u8> = (0..N * 784).map(|_| rng.next_u64() as u8).collect();
    let labels: Vec<i32> = (0..N).map(|_| rng.below(10) as i32).collect();
    Dataset::from_tensor_slices(vec![
        (
            "image".into(),
            Array::new(
                ArrayShape::new(ElementType::U8, &[N as i64, 28, 28]),
                ArrayData::U8(images),
            ),
        ),
        (
            "label".into(),
            Array::new(
                ArrayShape::new(ElementType::S32, &[N as i64]),
                ArrayData::S32(labels),
            ),
        ),
    ])
    .unwrap()
}

/// The guide's normalization: `tf.cast(image, tf.float32) / 255 - 0.5`.
fn normalize(mut e: Element) -> Result<Element, DatasetError> {
    if let Value::Dense(a) = &e.values[0] {
        if let ArrayData::U8(px) = &a.data {
            let f: Vec<f32> = px.iter().map(|&p| p as f32 / 255.0 - 0.5).collect();
            e.values[0] = Value::Dense(Array::f32(&[28, 28], f));
        }
    }
    Ok(e)
}

fn float_images(s: &ElementSpec) -> Result<ElementSpec, DatasetError> {
    let mut s = s.clone();
    s.components[0].1 = ValueSpec::Dense {
        element_type: ElementType::F32,
        dims: vec![Some(28), Some(28)],
    };
    Ok(s)
}

/// The guide's pipeline with `map_workers` map threads (1: on the pipeline's thread), with or
/// without a prefetch thread.
fn pipeline(source: &Dataset, map_workers: usize, prefetch: bool) -> Dataset {
    let d = source
        .clone()
        .map(float_images, map_workers, normalize)
        .unwrap()
        .cache()
        .repeat(None)
        .batch(BATCH, true)
        .unwrap();
    if prefetch {
        d.prefetch(4)
    } else {
        d
    }
}

fn report(what: &str, batches: usize, secs: f64) {
    println!(
        "  {what:<44} {:>9.0} examples/s  {:>7.1} µs/batch",
        batches as f64 * BATCH as f64 / secs,
        secs * 1e6 / batches as f64
    );
}

/// CPU time of this process (user + system) in seconds, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|u| u.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// Prints the CPU time (all threads) per batch since `since`.
fn cpu_line(since: f64, batches: usize) {
    println!(
        "  {:<44} {:>7.1} µs/batch of CPU (all threads)",
        "",
        (cpu_seconds() - since) * 1e6 / batches as f64
    );
}

fn main() {
    let source = mnist_like();
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |k: &str| {
        cpu.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split(':').nth(1))
            .map(str::trim)
            .unwrap_or("?")
            .to_string()
    };
    println!(
        "dataset bench: {N} u8 [28,28] images, batch {BATCH}; cpu family {} model {} ({})",
        field("cpu family"),
        field("model\t"),
        field("model name")
    );
    let configs = [
        ("1 thread: all on the caller", 1, false),
        ("2 threads: the pipeline on the prefetch thread", 1, true),
        ("3 threads: 2 map workers, prefetch", 2, true),
    ];
    for (name, map_workers, prefetch) in configs {
        println!("{name}:");
        let d = pipeline(&source, map_workers, prefetch);
        let mut it = d.iter();
        let (t, c0) = (Instant::now(), cpu_seconds());
        for _ in 0..BATCHES_PER_EPOCH {
            it.next().unwrap().unwrap();
        }
        report(
            "first epoch (map, fill cache)",
            BATCHES_PER_EPOCH,
            t.elapsed().as_secs_f64(),
        );
        cpu_line(c0, BATCHES_PER_EPOCH);
        let steady = 3 * BATCHES_PER_EPOCH;
        let t = Instant::now();
        let c1 = cpu_seconds();
        for _ in 0..steady {
            it.next().unwrap().unwrap();
        }
        let secs = t.elapsed().as_secs_f64();
        report("cached epochs (batch from cache)", steady, secs);
        cpu_line(c1, steady);
        drop(it);

        let mut feed = infeed_source(&d, &["image", "label"], 0).unwrap();
        for _ in 0..BATCHES_PER_EPOCH {
            feed.next().unwrap().unwrap();
        }
        let t = Instant::now();
        for _ in 0..steady {
            feed.next().unwrap().unwrap();
        }
        report(
            "infeed source, cached epochs",
            steady,
            t.elapsed().as_secs_f64(),
        );
    }

    println!("resume at step 2000 (batch 128 = element 256000, epoch 4):");
    let t = Instant::now();
    let d = pipeline(&source, 1, false);
    let mut it = d.iter_from(2000);
    it.next().unwrap().unwrap();
    println!(
        "  {:<44} {:>7.1} ms (a fresh process: the map runs from the resumed offset)",
        "cache -> repeat -> batch",
        t.elapsed().as_secs_f64() * 1e3
    );
    let shuffled = source
        .clone()
        .map(float_images, 1, normalize)
        .unwrap()
        .cache()
        .shuffle(10000, 1)
        .unwrap()
        .repeat(None)
        .batch(BATCH, true)
        .unwrap();
    let t = Instant::now();
    let mut it = shuffled.iter_from(2000);
    it.next().unwrap().unwrap();
    println!(
        "  {:<44} {:>7.1} ms (epoch 4 from its start: 16000 draws, the map over 26000)",
        "cache -> shuffle(10000) -> repeat -> batch",
        t.elapsed().as_secs_f64() * 1e3
    );
    // A source of unknown length (as a TFRecord file is): repeat reads epoch 0 to count it.
    let unknown = {
        let s = source.clone();
        Dataset::from_generator(source.element_spec().clone(), move || {
            Ok(Box::new(s.iter()) as tessel_estimator::input::dataset::ElementIter)
        })
    };
    let t = Instant::now();
    let mut it = pipeline(&unknown, 1, false).iter_from(2000);
    it.next().unwrap().unwrap();
    println!(
        "  {:<44} {:>7.1} ms (epoch 0 read, which fills the cache and makes the length known, then a jump)",
        "file-like source -> cache -> repeat -> batch",
        t.elapsed().as_secs_f64() * 1e3
    );
}
