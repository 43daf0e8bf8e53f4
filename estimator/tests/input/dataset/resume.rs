//! Resuming a pipeline at any position: fixed and random pipelines, unknown lengths, caches
//! that did not fill, epochs of different lengths.

use super::*;

/// The pipelines the resume test checks, all shuffled and repeated and batched.
fn resumable_pipelines() -> Vec<(&'static str, Dataset)> {
    let normalized = || numbers(37).map(same_spec, 2, times3).unwrap();
    vec![
        (
            "map, cache, shuffle, repeat, batch, prefetch",
            normalized()
                .cache()
                .shuffle(16, 5)
                .unwrap()
                .repeat(None)
                .batch(8, true)
                .unwrap()
                .prefetch(2),
        ),
        (
            "repeat then shuffle",
            normalized()
                .repeat(Some(6))
                .shuffle(20, 9)
                .unwrap()
                .batch(5, false)
                .unwrap(),
        ),
        (
            "filter (unknown cardinality) under repeat, shard",
            normalized()
                .filter(|e| Ok(dense(e, 0).data.get_i64(0) % 2 == 0))
                .shuffle(7, 3)
                .unwrap()
                .repeat(None)
                .shard(2, 1)
                .unwrap()
                .batch(3, true)
                .unwrap(),
        ),
        (
            "interleave, skip, take, padded batch",
            Dataset::interleave(vec![numbers(11), numbers(5), numbers(8)], 2, 3)
                .unwrap()
                .shuffle(4, 2)
                .unwrap()
                .repeat(Some(5))
                .skip(3)
                .take(90)
                .padded_batch_with_mask(7, "w")
                .unwrap(),
        ),
    ]
}

#[test]
fn resuming_at_any_position_gives_what_the_uninterrupted_iterator_gives() {
    for (name, d) in resumable_pipelines() {
        let whole: Vec<Element> = d.iter().take(40).map(Result::unwrap).collect();
        for k in [0usize, 1, 4, 5, 9, 13, 27, 39] {
            let mut it = d.iter_from(k as u64);
            assert_eq!(it.position(), k as u64);
            let rest: Vec<Element> = (&mut it).take(40 - k).map(Result::unwrap).collect();
            assert_eq!(
                rest.len(),
                whole.len() - k.min(whole.len()),
                "{name} at {k}"
            );
            assert_eq!(rest[..], whole[k.min(whole.len())..], "{name} at {k}");
            assert_eq!(it.position(), whole.len().max(k) as u64, "{name}");
        }
        // Resuming from a live iterator's position.
        let mut it = d.iter();
        let first: Vec<_> = (&mut it).take(11).collect();
        assert_eq!(first.len(), 11.min(whole.len()));
        let again: Vec<Element> = d
            .iter_from(it.position())
            .take(5)
            .map(Result::unwrap)
            .collect();
        let next: Vec<Element> = it.take(5).map(Result::unwrap).collect();
        assert_eq!(again, next, "{name}");
    }
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let invalid = |r: Result<Dataset, DatasetError>| {
        assert!(
            matches!(r, Err(DatasetError::InvalidArgument { .. })),
            "{r:?}"
        )
    };
    invalid(numbers(3).batch(0, true));
    invalid(numbers(3).padded_batch_with_mask(0, "w"));
    invalid(numbers(3).padded_batch_with_mask(2, "x"));
    invalid(
        numbers(3)
            .batch(2, false)
            .unwrap()
            .padded_batch_with_mask(2, "w"),
    );
    invalid(numbers(3).shard(0, 0));
    invalid(numbers(3).shard(2, 2));
    invalid(numbers(3).shuffle(0, 1));
    invalid(Dataset::interleave(vec![], 1, 1));
    invalid(Dataset::interleave(vec![numbers(2)], 0, 1));
    invalid(Dataset::interleave(
        vec![numbers(2), numbers(2).batch(2, true).unwrap()],
        2,
        1,
    ));
    invalid(Dataset::from_tensor_slices(vec![]));
    invalid(Dataset::from_tensor_slices(vec![(
        "s".into(),
        Array::scalar_f32(1.0),
    )]));
    invalid(Dataset::from_tensor_slices(vec![
        ("a".into(), s32(&[2], vec![1, 2])),
        ("b".into(), s32(&[3], vec![1, 2, 3])),
    ]));
    invalid(Dataset::from_tensor_slices(vec![
        ("a".into(), s32(&[2], vec![1, 2])),
        ("a".into(), s32(&[2], vec![1, 2])),
    ]));
    // A generator that cannot open, and one that breaks its spec.
    let spec = numbers(1).element_spec().clone();
    let d = Dataset::from_generator(spec.clone(), || {
        Err(DatasetError::source("gen", "cannot open"))
    });
    assert_eq!(
        d.iter().next().unwrap().unwrap_err().to_string(),
        "gen: cannot open"
    );
    let d = Dataset::from_generator(spec, || {
        Ok(Box::new(std::iter::once(Ok(Element::new(vec![Value::Dense(
            Array::scalar_f32(1.0),
        )])))) as ElementIter)
    });
    assert!(matches!(
        d.iter().next().unwrap(),
        Err(DatasetError::SpecMismatch { .. })
    ));
    // Positions past the end just end.
    assert_eq!(numbers(3).iter_from(10).count(), 0);
    assert_eq!(
        numbers(3)
            .batch(2, true)
            .unwrap()
            .iter_from(u64::MAX)
            .count(),
        0
    );
    assert_eq!(numbers(3).repeat(Some(2)).iter_from(u64::MAX).count(), 0);
}

#[test]
fn resuming_over_an_input_of_unknown_length_reads_one_epoch_then_jumps() {
    // Below a cache: epoch 0 fills it, which makes the length known, then repeat jumps.
    let opens = Arc::new(AtomicUsize::new(0));
    let d = counted(5, opens.clone())
        .cache()
        .shuffle(3, 4)
        .unwrap()
        .repeat(Some(6));
    let whole = xs(&d);
    assert_eq!(opens.swap(0, Ordering::SeqCst), 1);
    let fresh = counted(5, opens.clone())
        .cache()
        .shuffle(3, 4)
        .unwrap()
        .repeat(Some(6));
    let resumed: Vec<i64> = fresh
        .iter_from(22)
        .map(|r| dense(&r.unwrap(), 0).data.get_i64(0))
        .collect();
    assert_eq!(resumed, whole[22..]);
    assert_eq!(opens.load(Ordering::SeqCst), 1);
    assert_eq!(fresh.iter_from(30).count(), 0);
    // Without a cache the length stays unknown, so every epoch up to the position is read
    // (epochs may differ in length), and the result is still exact.
    opens.store(0, Ordering::SeqCst);
    let d = counted(5, opens.clone())
        .shuffle(3, 4)
        .unwrap()
        .repeat(Some(6));
    let whole = xs(&d);
    let resumed: Vec<i64> = d
        .iter_from(22)
        .map(|r| dense(&r.unwrap(), 0).data.get_i64(0))
        .collect();
    assert_eq!(resumed, whole[22..]);
    assert_eq!(opens.load(Ordering::SeqCst), 12);
}

#[test]
fn resuming_mid_epoch_over_an_unfilled_cache() {
    let opens = Arc::new(AtomicUsize::new(0));
    let d = counted(5, opens.clone()).cache().repeat(Some(4));
    let got: Vec<i64> = d
        .iter_from(7)
        .map(|r| dense(&r.unwrap(), 0).data.get_i64(0))
        .collect();
    assert_eq!(got, [0, 1, 2, 3, 4].repeat(4)[7..]);
    // The length is unknown until epoch 0 has filled the cache; every later epoch is served
    // from it.
    assert_eq!(opens.load(Ordering::SeqCst), 1);
    // Known length: epoch 1 is read from its offset (no fill), epoch 2 fills the cache. Each
    // resume uses a fresh dataset, so its cache starts empty.
    let fresh = || {
        numbers(5)
            .map(same_spec, 1, times3)
            .unwrap()
            .cache()
            .repeat(Some(4))
    };
    let whole = xs(&fresh());
    for k in [0, 4, 5, 7, 12, 19, 20] {
        let got: Vec<i64> = fresh()
            .iter_from(k as u64)
            .map(|r| dense(&r.unwrap(), 0).data.get_i64(0))
            .collect();
        assert_eq!(got, whole[k..], "at {k}");
    }
}

/// Builds a random pipeline of 1 to 6 transformations over 1 to 3 sources, ending with a
/// take(50) so even `repeat()` is bounded. Returns the pipeline and its description.
fn random_pipeline(seed: u64) -> (Dataset, String) {
    use tessel_estimator::input::dataset::rng::SplitMix64;
    let mut rng = SplitMix64::new(seed);
    let mut r = |n: u64| rng.below(n);
    let mut desc = vec![];
    let sources = 1 + r(3) as usize;
    let mut d = if sources == 1 && r(2) == 0 {
        desc.push("slices".to_string());
        numbers(5 + r(20) as i32)
    } else if sources == 1 {
        // A source of unknown length, as a file is.
        desc.push("generator".to_string());
        let inner = numbers(5 + r(20) as i32);
        Dataset::from_generator(inner.element_spec().clone(), move || {
            Ok(Box::new(inner.iter()) as ElementIter)
        })
    } else {
        let parts = (0..sources).map(|_| numbers(1 + r(9) as i32)).collect();
        let (c, b) = (1 + r(3) as usize, 1 + r(3) as usize);
        desc.push(format!("interleave({sources}, {c}, {b})"));
        Dataset::interleave(parts, c, b).unwrap()
    };
    let mut batched = false;
    for _ in 0..1 + r(6) {
        let op = r(11);
        d = match op {
            0 => {
                let w = r(3) as usize;
                desc.push(format!("map({w})"));
                d.map(same_spec, w, times3).unwrap()
            }
            1 => {
                desc.push("filter".into());
                d.filter(|e| Ok(dense(e, 0).data.get_i64(0) % 5 != 2))
            }
            2 => {
                let (b, s) = (1 + r(12) as usize, r(1000));
                desc.push(format!("shuffle({b}, {s})"));
                d.shuffle(b, s).unwrap()
            }
            3 => {
                let n = 1 + r(3);
                desc.push(format!("repeat({n})"));
                d.repeat(Some(n))
            }
            4 if !batched => {
                let (n, drop) = (1 + r(4), r(2) == 0);
                desc.push(format!("batch({n}, {drop})"));
                batched = true;
                d.batch(n, drop).unwrap()
            }
            5 if !batched => {
                let n = 1 + r(4);
                desc.push(format!("padded_batch_with_mask({n})"));
                batched = true;
                d.padded_batch_with_mask(n, "w").unwrap()
            }
            6 => {
                desc.push("cache".into());
                d.cache()
            }
            7 => {
                let n = 1 + r(3) as usize;
                desc.push(format!("prefetch({n})"));
                d.prefetch(n)
            }
            8 => {
                let n = r(30);
                desc.push(format!("take({n})"));
                d.take(n)
            }
            9 => {
                let n = r(8);
                desc.push(format!("skip({n})"));
                d.skip(n)
            }
            _ => {
                let num = 1 + r(3);
                let index = r(num);
                desc.push(format!("shard({num}, {index})"));
                d.shard(num, index).unwrap()
            }
        };
    }
    if r(2) == 0 {
        desc.push("repeat()".into());
        d = d.repeat(None);
    }
    (d.take(50), desc.join(" -> "))
}

#[test]
fn random_pipelines_resume_exactly_at_every_position() {
    for seed in 0..120 {
        let (d, desc) = random_pipeline(seed);
        let whole = all(&d);
        assert_eq!(whole, all(&d), "{desc}: a second run differs");
        let n = whole.len();
        for k in [0, 1, n / 3, n / 2, n.saturating_sub(1), n, n + 2] {
            let rest: Vec<Element> = d.iter_from(k as u64).map(Result::unwrap).collect();
            assert_eq!(rest[..], whole[k.min(n)..], "{desc}: resumed at {k} of {n}");
        }
    }
}

/// Regression: a pass over a cache that did not fill it (a `take` above it stopping early)
/// opened the input with its own epoch key, so a shuffle below the cache gave each epoch a new
/// order until some pass (timing-dependent, with a prefetch reading ahead) filled the cache
/// and froze it. Every pass over a cache now gives the cached pass's elements.
#[test]
fn every_pass_over_a_cache_gives_the_same_elements_filled_or_not() {
    let cached = numbers(8).shuffle(8, 3).unwrap().cache();
    let d = cached.clone().take(5).repeat(Some(3));
    let v = xs(&d);
    assert_eq!(v.len(), 15);
    assert_eq!(v[0..5], v[5..10]);
    assert_eq!(v[5..10], v[10..15]);
    let full = xs(&cached); // fills the cache
    assert_eq!(v[0..5], full[0..5]);
    assert_eq!(xs(&d), v);
}

/// Regression: repeat over an input of unknown length jumped whole epochs after counting
/// epoch 0, but a `take` after a shuffle keeps a different subset each epoch, which a filter
/// then thins to a different length, so the resumed iterator landed in the wrong place.
#[test]
fn epochs_of_different_lengths_resume_exactly() {
    let d = numbers(10)
        .shuffle(10, 11)
        .unwrap()
        .take(5)
        .filter(|e| Ok(dense(e, 0).data.get_i64(0) % 2 == 0))
        .repeat(Some(6));
    let whole = xs(&d);
    for k in 0..=whole.len() {
        let got: Vec<i64> = d
            .iter_from(k as u64)
            .map(|r| dense(&r.unwrap(), 0).data.get_i64(0))
            .collect();
        assert_eq!(got, whole[k..], "resumed at {k}");
    }
}
