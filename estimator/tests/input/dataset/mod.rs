//! The Dataset: each source and transformation (order, determinism, epochs, padding, errors),
//! exact resume from a position, infeed, and no panic on bad input.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal};
use tessel_estimator::input::dataset::{Cardinality, ElementIter, STATIC_SHAPE_ADVICE};
use tessel_estimator::input::{Dataset, DatasetError, Element, ElementSpec, Value, ValueSpec};

mod infeed;
mod resume;

fn s32(dims: &[i64], v: Vec<i32>) -> Array {
    Array::new(ArrayShape::new(ElementType::S32, dims), ArrayData::S32(v))
}

/// Elements `x` = i (s32 scalar) and `y` = [i, -i] (f32 [2]) for i in 0..n.
fn numbers(n: i32) -> Dataset {
    let y = (0..n).flat_map(|i| [i as f32, -i as f32]).collect();
    Dataset::from_tensor_slices(vec![
        ("x".into(), s32(&[n as i64], (0..n).collect())),
        ("y".into(), Array::f32(&[n as i64, 2], y)),
    ])
    .unwrap()
}

fn dense(e: &Element, c: usize) -> &Array {
    match &e.values[c] {
        Value::Dense(a) => a,
        other => panic!("not dense: {other:?}"),
    }
}

/// Component 0 of every element, flattened, as i64.
fn xs(d: &Dataset) -> Vec<i64> {
    d.iter()
        .flat_map(|r| {
            let e = r.unwrap();
            let a = dense(&e, 0);
            (0..a.len()).map(|i| a.data.get_i64(i)).collect::<Vec<_>>()
        })
        .collect()
}

fn all(d: &Dataset) -> Vec<Element> {
    d.iter().map(Result::unwrap).collect()
}

fn same_spec(s: &ElementSpec) -> Result<ElementSpec, DatasetError> {
    Ok(s.clone())
}

/// `x` -> `x * 3`, sleeping a little on some elements so parallel workers finish out of order.
fn triple(e: Element) -> Result<Element, DatasetError> {
    if dense(&e, 0).data.get_i64(0) % 3 == 0 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    times3(e)
}

/// `x` -> `x * 3`.
fn times3(mut e: Element) -> Result<Element, DatasetError> {
    if let Value::Dense(a) = &mut e.values[0] {
        if let ArrayData::S32(v) = &mut a.data {
            v[0] *= 3;
        }
    }
    Ok(e)
}

#[test]
fn from_tensor_slices_gives_rows_in_order_with_a_static_spec() {
    let d = numbers(4);
    assert_eq!(d.cardinality(), Cardinality::Finite(4));
    assert_eq!(
        d.element_spec().components[1].1,
        ValueSpec::Dense {
            element_type: ElementType::F32,
            dims: vec![Some(2)]
        }
    );
    let els = all(&d);
    assert_eq!(els.len(), 4);
    assert_eq!(dense(&els[2], 1).data, ArrayData::F32(vec![2.0, -2.0]));
    assert_eq!(dense(&els[2], 0).shape.dims.len(), 0);
}

#[test]
fn map_keeps_order_whatever_the_number_of_workers() {
    let want: Vec<i64> = (0..50).map(|i| 3 * i).collect();
    for workers in [0, 1, 2, 4] {
        let d = numbers(50).map(same_spec, workers, triple).unwrap();
        assert_eq!(xs(&d), want, "{workers} workers");
        assert_eq!(xs(&d), want, "{workers} workers, second pass");
    }
}

#[test]
fn map_can_change_the_spec() {
    let d = numbers(3)
        .map(
            |_| {
                Ok(ElementSpec {
                    components: vec![(
                        "z".into(),
                        ValueSpec::Dense {
                            element_type: ElementType::F32,
                            dims: vec![],
                        },
                    )],
                })
            },
            2,
            |e| {
                let x = dense(&e, 0).data.get_f64(0) as f32;
                Ok(Element::new(vec![Value::Dense(Array::scalar_f32(x / 2.0))]))
            },
        )
        .unwrap();
    assert_eq!(d.element_spec().components[0].0, "z");
    let got: Vec<f64> = all(&d)
        .iter()
        .map(|e| dense(e, 0).data.get_f64(0))
        .collect();
    assert_eq!(got, vec![0.0, 0.5, 1.0]);
}

#[test]
fn a_map_output_that_breaks_the_spec_is_an_error_naming_the_element() {
    let d = numbers(5)
        .map(same_spec, 2, |e| {
            if dense(&e, 0).data.get_i64(0) == 3 {
                Ok(Element::new(vec![]))
            } else {
                Ok(e)
            }
        })
        .unwrap();
    let results: Vec<_> = d.iter().collect();
    assert_eq!(results.len(), 4, "the iterator ends after the error");
    let err = results[3].as_ref().unwrap_err();
    assert!(
        matches!(err, DatasetError::SpecMismatch { index: 3, .. }),
        "{err}"
    );
}

#[test]
fn a_panic_in_map_is_an_error_not_an_abort() {
    for workers in [1, 3] {
        let d = numbers(10)
            .map(same_spec, workers, |e| {
                if dense(&e, 0).data.get_i64(0) == 6 {
                    panic!("bad element six");
                }
                Ok(e)
            })
            .unwrap();
        let mut it = d.iter();
        for i in 0..6 {
            assert_eq!(dense(&it.next().unwrap().unwrap(), 0).data.get_i64(0), i);
        }
        let err = it.next().unwrap().unwrap_err();
        assert!(
            matches!(&err, DatasetError::Panicked { op: "map", index: 6, message } if message == "bad element six"),
            "{err}"
        );
        assert!(it.next().is_none());
    }
}

#[test]
fn filter_keeps_matching_elements_and_catches_panics() {
    let d = numbers(10).filter(|e| Ok(dense(e, 0).data.get_i64(0) % 3 == 0));
    assert_eq!(xs(&d), vec![0, 3, 6, 9]);
    assert_eq!(d.cardinality(), Cardinality::Unknown);
    let bad = numbers(3).filter(|_| panic!("predicate"));
    let err = bad.iter().next().unwrap().unwrap_err();
    assert!(matches!(
        err,
        DatasetError::Panicked {
            op: "filter",
            index: 0,
            ..
        }
    ));
}

fn is_permutation(v: &[i64], n: i64) -> bool {
    let mut s = v.to_vec();
    s.sort();
    s == (0..n).collect::<Vec<_>>()
}

#[test]
fn shuffle_is_deterministic_for_a_seed_and_a_permutation() {
    let a = xs(&numbers(100).shuffle(30, 7).unwrap());
    let b = xs(&numbers(100).shuffle(30, 7).unwrap());
    let c = xs(&numbers(100).shuffle(30, 8).unwrap());
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(is_permutation(&a, 100));
    assert_ne!(a, (0..100).collect::<Vec<_>>());
    // A buffer of 1 cannot move anything.
    assert_eq!(
        xs(&numbers(20).shuffle(1, 7).unwrap()),
        (0..20).collect::<Vec<_>>()
    );
    // The buffer bounds how early an element can come out: element i comes out at a
    // position of at least i - (buffer - 1).
    for (pos, &x) in a.iter().enumerate() {
        assert!(x <= pos as i64 + 29, "{x} at {pos}");
    }
}

#[test]
fn shuffle_reshuffles_each_epoch_under_repeat() {
    let d = numbers(40).shuffle(40, 1).unwrap().repeat(Some(3));
    let v = xs(&d);
    assert_eq!(v.len(), 120);
    let epochs: Vec<&[i64]> = v.chunks(40).collect();
    for e in &epochs {
        assert!(is_permutation(e, 40));
    }
    assert_ne!(epochs[0], epochs[1]);
    assert_ne!(epochs[1], epochs[2]);
    assert_eq!(v, xs(&d), "the same for the same seed on every run");
}

#[test]
fn repeat_boundaries() {
    assert_eq!(xs(&numbers(3).repeat(Some(2))), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(xs(&numbers(3).repeat(Some(0))), Vec::<i64>::new());
    assert_eq!(
        xs(&numbers(3).repeat(None).take(7)),
        vec![0, 1, 2, 0, 1, 2, 0]
    );
    assert_eq!(numbers(3).repeat(None).cardinality(), Cardinality::Infinite);
    assert_eq!(
        numbers(3).repeat(Some(4)).cardinality(),
        Cardinality::Finite(12)
    );
    // Repeating nothing forever ends instead of spinning.
    let empty = numbers(5).filter(|_| Ok(false)).repeat(None);
    assert_eq!(empty.iter().count(), 0);
    // A batch spanning an epoch boundary takes from both epochs.
    let b = numbers(3).repeat(Some(2)).batch(4, false).unwrap();
    assert_eq!(xs(&b), vec![0, 1, 2, 0, 1, 2]);
}

#[test]
fn batch_with_and_without_drop_remainder() {
    let kept = numbers(10).batch(4, false).unwrap();
    assert_eq!(
        kept.element_spec().components[1].1,
        ValueSpec::Dense {
            element_type: ElementType::F32,
            dims: vec![None, Some(2)]
        }
    );
    assert_eq!(kept.cardinality(), Cardinality::Finite(3));
    let b = all(&kept);
    assert_eq!(b.len(), 3);
    assert_eq!(dense(&b[0], 0).shape.dims.to_vec(), vec![4]);
    assert_eq!(dense(&b[2], 0).shape.dims.to_vec(), vec![2]);
    assert_eq!(dense(&b[2], 0).data, ArrayData::S32(vec![8, 9]));
    assert_eq!(dense(&b[2], 1).shape.dims.to_vec(), vec![2, 2]);
    assert_eq!(
        dense(&b[1], 1).data,
        ArrayData::F32(vec![4., -4., 5., -5., 6., -6., 7., -7.])
    );

    let dropped = numbers(10).batch(4, true).unwrap();
    assert_eq!(
        dropped.element_spec().components[0].1,
        ValueSpec::Dense {
            element_type: ElementType::S32,
            dims: vec![Some(4)]
        }
    );
    assert_eq!(dropped.cardinality(), Cardinality::Finite(2));
    assert_eq!(xs(&dropped), (0..8).collect::<Vec<_>>());
}

#[test]
fn padded_batch_pads_the_last_batch_and_masks_it() {
    let d = numbers(10).padded_batch_with_mask(4, "weight").unwrap();
    let spec = d.element_spec();
    assert_eq!(spec.components.len(), 3);
    assert!(spec.components.iter().all(|(_, s)| s.is_static()));
    let b = all(&d);
    assert_eq!(b.len(), 3);
    assert_eq!(dense(&b[0], 2).data, ArrayData::F32(vec![1.0; 4]));
    assert_eq!(dense(&b[2], 0).data, ArrayData::S32(vec![8, 9, 0, 0]));
    assert_eq!(
        dense(&b[2], 1).data,
        ArrayData::F32(vec![8., -8., 9., -9., 0., 0., 0., 0.])
    );
    assert_eq!(dense(&b[2], 2).data, ArrayData::F32(vec![1., 1., 0., 0.]));
    // An exact multiple gets no padded batch.
    assert_eq!(
        numbers(8)
            .padded_batch_with_mask(4, "w")
            .unwrap()
            .iter()
            .count(),
        2
    );
}

#[test]
fn shard_take_and_skip() {
    assert_eq!(xs(&numbers(10).shard(3, 1).unwrap()), vec![1, 4, 7]);
    assert_eq!(xs(&numbers(10).shard(3, 0).unwrap()), vec![0, 3, 6, 9]);
    assert_eq!(
        numbers(10).shard(3, 2).unwrap().cardinality(),
        Cardinality::Finite(3)
    );
    assert_eq!(xs(&numbers(10).take(3)), vec![0, 1, 2]);
    assert_eq!(xs(&numbers(10).skip(7)), vec![7, 8, 9]);
    assert_eq!(xs(&numbers(10).skip(20)), Vec::<i64>::new());
    assert_eq!(xs(&numbers(10).skip(2).take(3)), vec![2, 3, 4]);
}

/// A generator of `n` scalar elements that counts how often it is opened.
fn counted(n: i32, opens: Arc<AtomicUsize>) -> Dataset {
    let spec = ElementSpec {
        components: vec![(
            "x".into(),
            ValueSpec::Dense {
                element_type: ElementType::S32,
                dims: vec![],
            },
        )],
    };
    Dataset::from_generator(spec, move || {
        opens.fetch_add(1, Ordering::SeqCst);
        let it: ElementIter =
            Box::new((0..n).map(|i| Ok(Element::new(vec![Value::Dense(Array::scalar_s32(i))]))));
        Ok(it)
    })
}

#[test]
fn cache_reads_the_source_once() {
    let opens = Arc::new(AtomicUsize::new(0));
    let d = counted(5, opens.clone()).cache().repeat(Some(4));
    assert_eq!(xs(&d).len(), 20);
    assert_eq!(opens.load(Ordering::SeqCst), 1);
    assert_eq!(xs(&d), [0, 1, 2, 3, 4].repeat(4));
    assert_eq!(
        opens.load(Ordering::SeqCst),
        1,
        "a second iterator also reads the cache"
    );
    // Without cache each epoch reads the source.
    let opens2 = Arc::new(AtomicUsize::new(0));
    let _ = xs(&counted(5, opens2.clone()).repeat(Some(4)));
    assert_eq!(opens2.load(Ordering::SeqCst), 4);
}

#[test]
fn a_pass_dropped_half_way_does_not_fill_the_cache() {
    let opens = Arc::new(AtomicUsize::new(0));
    let d = counted(5, opens.clone()).cache();
    let mut it = d.iter();
    it.next();
    drop(it);
    assert_eq!(xs(&d), vec![0, 1, 2, 3, 4]);
    assert_eq!(xs(&d), vec![0, 1, 2, 3, 4]);
    assert_eq!(opens.load(Ordering::SeqCst), 2);
}

#[test]
fn prefetch_gives_the_same_elements_and_stops_when_dropped() {
    let base = numbers(30).map(same_spec, 2, triple).unwrap();
    assert_eq!(xs(&base.clone().prefetch(3)), xs(&base));
    // An infinite prefetched pipeline dropped early does not hang.
    let mut it = base.repeat(None).prefetch(2).iter();
    assert!(it.next().unwrap().is_ok());
    drop(it);
}

#[test]
fn interleave_follows_tf_data_order() {
    // TF 2.15: Dataset.range(3).interleave(lambda i: <i*10 + range(len[i])>, cycle_length=2,
    // block_length=2) with lens [4, 2, 5], and range(5), cycle 3, block 2, lens [3,1,6,0,2].
    let parts = |lens: &[i32]| -> Vec<Dataset> {
        lens.iter()
            .enumerate()
            .map(|(i, &n)| {
                let v: Vec<i32> = (0..n).map(|j| i as i32 * 10 + j).collect();
                Dataset::from_tensor_slices(vec![("x".into(), s32(&[n as i64], v))]).unwrap()
            })
            .collect()
    };
    let d = Dataset::interleave(parts(&[4, 2, 5]), 2, 2).unwrap();
    assert_eq!(xs(&d), vec![0, 1, 10, 11, 2, 3, 20, 21, 22, 23, 24]);
    let d = Dataset::interleave(parts(&[3, 1, 6, 0, 2]), 3, 2).unwrap();
    assert_eq!(xs(&d), vec![0, 1, 10, 20, 21, 2, 22, 23, 40, 41, 24, 25]);
}

/// The record reader's error type in the tests.
#[derive(Debug, thiserror::Error)]
#[error("bad CRC at byte {0}")]
struct ReadError(u64);

#[test]
fn source_errors_pass_through_with_their_context() {
    let d = Dataset::from_records(
        "record",
        "data/train.tfrecords",
        Box::new(|| {
            let records: Vec<Result<Vec<u8>, ReadError>> =
                vec![Ok(b"a".to_vec()), Ok(b"b".to_vec()), Err(ReadError(42))];
            Ok(Box::new(records.into_iter()) as Box<dyn Iterator<Item = _> + Send>)
        }),
    );
    let d = d.batch(2, false).unwrap().prefetch(2);
    let r: Vec<_> = d.iter().collect();
    assert_eq!(r.len(), 2);
    match &r[0] {
        Ok(e) => assert_eq!(
            e.values[0],
            Value::Bytes {
                dims: vec![2],
                items: vec![b"a".to_vec(), b"b".to_vec()]
            }
        ),
        Err(e) => panic!("{e}"),
    }
    let err = r[1].as_ref().unwrap_err();
    assert_eq!(err.to_string(), "data/train.tfrecords: bad CRC at byte 42");
    assert!(std::error::Error::source(err).is_some());
}

#[test]
fn batching_elements_of_different_shapes_is_an_error() {
    let spec = ElementSpec {
        components: vec![(
            "v".into(),
            ValueSpec::Dense {
                element_type: ElementType::F32,
                dims: vec![None],
            },
        )],
    };
    let d = Dataset::from_generator(spec, || {
        let it: ElementIter = Box::new((1..4).map(|n| {
            Ok(Element::new(vec![Value::Dense(Array::f32(
                &[n],
                vec![0.0; n as usize],
            ))]))
        }));
        Ok(it)
    });
    let err = d
        .batch(3, true)
        .unwrap()
        .iter()
        .next()
        .unwrap()
        .unwrap_err();
    match err {
        DatasetError::ShapeMismatch {
            component,
            index,
            expected,
            found,
        } => {
            assert_eq!((component.as_str(), index), ("v", 1));
            assert_eq!((expected, found), (vec![1], vec![2]));
        }
        other => panic!("{other}"),
    }
}

#[test]
fn malformed_arrays_are_errors_not_panics() {
    // Array's fields are public, so a hand-built one may not hold what its shape says.
    let short = Array {
        shape: ArrayShape::new(ElementType::F32, &[3, 2]),
        data: ArrayData::F32(vec![1.0; 5]),
    };
    assert!(matches!(
        Dataset::from_tensor_slices(vec![("a".into(), short.clone())]),
        Err(DatasetError::InvalidArgument { .. })
    ));
    let unknown = Array {
        shape: ArrayShape::new(ElementType::F32, &[-1, 2]),
        data: ArrayData::F32(vec![]),
    };
    assert!(Dataset::from_tensor_slices(vec![("a".into(), unknown)]).is_err());
    // A generator giving a short array under a spec with unknown dims: batch catches it.
    let spec = ElementSpec {
        components: vec![(
            "v".into(),
            ValueSpec::Dense {
                element_type: ElementType::F32,
                dims: vec![None, None],
            },
        )],
    };
    let d = Dataset::from_generator(spec, move || {
        let good = Array::f32(&[3, 2], vec![0.0; 6]);
        let bad = short.clone();
        let it: ElementIter = Box::new(
            [good, bad]
                .into_iter()
                .map(|a| Ok(Element::new(vec![Value::Dense(a)]))),
        );
        Ok(it)
    });
    let err = d
        .batch(2, true)
        .unwrap()
        .iter()
        .next()
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(err, DatasetError::ShapeMismatch { index: 1, .. }),
        "{err}"
    );
}

// ---- ops on named components ----

#[test]
fn cast_scale_and_reshape_infer_the_spec_and_convert_as_tf_does() {
    // x s32 [] -> f32; y f32 [2] scaled and reshaped to [1, 2].
    let d = numbers(4)
        .cast("x", ElementType::F32)
        .unwrap()
        .scale("x", 0.5, -1.0)
        .unwrap()
        .scale("y", 2.0, 0.0)
        .unwrap()
        .reshape("y", &[1, 2])
        .unwrap();
    assert_eq!(
        d.element_spec().components,
        vec![
            (
                "x".to_string(),
                ValueSpec::Dense {
                    element_type: ElementType::F32,
                    dims: vec![]
                }
            ),
            (
                "y".to_string(),
                ValueSpec::Dense {
                    element_type: ElementType::F32,
                    dims: vec![Some(1), Some(2)]
                }
            ),
        ]
    );
    let e = all(&d);
    assert_eq!(dense(&e[3], 0), &Array::scalar_f32(3.0 * 0.5 - 1.0));
    assert_eq!(dense(&e[3], 1), &Array::f32(&[1, 2], vec![6.0, -6.0]));
    // Floats to integers round toward zero and saturate (Rust's `as`); NaN gives 0.
    let f = Dataset::from_tensor_slices(vec![(
        "v".into(),
        Array::f32(&[5], vec![-2.7, 2.7, 1e10, -1e10, f32::NAN]),
    )])
    .unwrap()
    .cast("v", ElementType::S32)
    .unwrap();
    assert_eq!(xs(&f), vec![-2, 2, i32::MAX as i64, i32::MIN as i64, 0]);
    // A cast to the same type is no op at all.
    assert_eq!(
        all(&numbers(3).cast("x", ElementType::S32).unwrap()),
        all(&numbers(3))
    );
}

#[test]
fn component_ops_refuse_wrong_names_and_types_when_built() {
    let err = |r: Result<Dataset, DatasetError>| r.unwrap_err().to_string();
    assert_eq!(
        err(numbers(2).cast("image", ElementType::F32)),
        "the dataset has no component `image` (it has `x`, `y`)"
    );
    assert_eq!(
        err(numbers(2).scale("x", 2.0, 0.0)),
        "scale: component `x` is S32; cast it to F32 first"
    );
    assert_eq!(
        err(numbers(2).reshape("y", &[3])),
        "reshape: component `y` has dims [2] (2 values), [3] needs 3"
    );
    assert_eq!(
        err(numbers(2).reshape("y", &[-1, 2])),
        "reshape: the shape [-1, 2] needs dimensions >= 0 and fewer than 2^31 elements"
    );
    assert_eq!(
        err(numbers(2).decode_raw(
            "y",
            "image",
            tessel_estimator::input::parse::RawType::U8,
            &[2]
        )),
        "decode_raw: component `y` is F32 [2], decode_raw needs a scalar string"
    );
    let strings = Dataset::from_generator(
        ElementSpec {
            components: vec![
                ("a".into(), ValueSpec::Bytes { dims: vec![] }),
                ("b".into(), ValueSpec::Bytes { dims: vec![] }),
            ],
        },
        || Ok(Box::new(std::iter::empty()) as ElementIter),
    );
    assert_eq!(
        err(strings.clone().decode_raw(
            "a",
            "b",
            tessel_estimator::input::parse::RawType::U8,
            &[2]
        )),
        "decode_raw: component `b` already exists"
    );
    assert_eq!(
        err(strings.clone().cast("a", ElementType::F32)),
        "cast: component `a` is strings [], cast needs a numeric array (decode strings with decode_raw)"
    );
    assert_eq!(
        err(strings.parse_example(tessel_estimator::input::parse::ParseSpec::new(), 1)),
        "parse_example: needs elements of one scalar string (a serialized tf.train.Example, as \
         tfrecord_dataset gives), these have `a` (strings []), `b` (strings [])"
    );
}

#[test]
fn a_map_function_reports_a_bad_element_without_knowing_its_index() {
    let d = numbers(10)
        .map(same_spec, 2, |e| match dense(&e, 0).data.get_i64(0) {
            7 => Err(DatasetError::msg("seven is not allowed")),
            _ => Ok(e),
        })
        .unwrap();
    let err = d.iter().find_map(Result::err).unwrap();
    // Elements made in memory have no record: the message names the element alone.
    assert_eq!(
        err.to_string(),
        "map failed on element 7: seven is not allowed"
    );
    assert!(all(&numbers(2)).iter().all(|e| e.origin.is_none()));
    // A generator's and a filter's alike.
    let spec = numbers(1).element_spec().clone();
    let g = Dataset::from_generator(spec, || {
        let items: Vec<_> = numbers(3)
            .iter()
            .take(2)
            .chain([Err(DatasetError::msg("no third"))])
            .collect();
        Ok(Box::new(items.into_iter()) as ElementIter)
    });
    assert_eq!(
        g.iter().find_map(Result::err).unwrap().to_string(),
        "from_generator failed on element 2: no third"
    );
    let f = numbers(5).filter(|e| match dense(e, 0).data.get_i64(0) {
        3 => Err(DatasetError::msg("three")),
        x => Ok(x % 2 == 0),
    });
    assert_eq!(
        f.iter().find_map(Result::err).unwrap().to_string(),
        "filter failed on element 3: three"
    );
}
