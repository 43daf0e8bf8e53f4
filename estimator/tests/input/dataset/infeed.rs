//! Datasets feeding the device: static dense batches only, tuples in order, replicas taking
//! turns on one pipeline, the runtime's infeed thread.

use super::*;

#[test]
fn the_device_gets_only_static_dense_batches() {
    // Unknown batch dimension: the guide's advice.
    let err = tessel_estimator::estimator::infeed::infeed_source(
        &numbers(10).batch(4, false).unwrap(),
        &["y"],
        0,
    )
    .err()
    .unwrap();
    assert!(matches!(err, DatasetError::NotStatic { .. }));
    assert!(err.to_string().contains(STATIC_SHAPE_ADVICE), "{err}");
    assert!(err.to_string().contains("[?, 2]"), "{err}");

    // Ragged values cannot be batched.
    let ragged = ElementSpec {
        components: vec![(
            "r".into(),
            ValueSpec::Ragged {
                element_type: ElementType::S32,
                dims: vec![None],
            },
        )],
    };
    let d = Dataset::from_generator(ragged, || Ok(Box::new(std::iter::empty()) as ElementIter));
    let err = d.clone().batch(2, true).unwrap_err();
    assert!(matches!(err, DatasetError::Ragged { .. }), "{err}");
    let err = tessel_estimator::estimator::infeed::infeed_source(&d, &["r"], 0)
        .err()
        .unwrap();
    assert!(err.to_string().contains("static shapes"), "{err}");

    // Strings and unknown names.
    let s = Dataset::from_records(
        "raw",
        "f",
        Box::new(|| {
            Ok(Box::new(std::iter::empty::<Result<Vec<u8>, ReadError>>())
                as Box<dyn Iterator<Item = _> + Send>)
        }),
    )
    .batch(2, true)
    .unwrap();
    let err = tessel_estimator::estimator::infeed::infeed_source(&s, &["raw"], 0)
        .err()
        .unwrap();
    assert!(matches!(err, DatasetError::NotNumeric { .. }), "{err}");
    let err = tessel_estimator::estimator::infeed::infeed_source(&s, &["image"], 0)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "the dataset has no component `image` (it has `raw`)"
    );
}

#[test]
fn infeed_gives_tuples_of_the_selected_components_in_order() {
    let d = numbers(10).batch(4, true).unwrap();
    let mut src = tessel_estimator::estimator::infeed::infeed_source(&d, &["y", "x"], 1).unwrap();
    let Literal::Tuple(t) = src.next().unwrap().unwrap() else {
        panic!("not a tuple")
    };
    assert_eq!(t.len(), 2);
    assert_eq!(t[1], Literal::Array(s32(&[4], vec![4, 5, 6, 7])));
    assert_eq!(t[0].as_array().unwrap().shape.dims.to_vec(), vec![4, 2]);
    assert!(src.next().is_none());
}

#[test]
fn datasets_and_iterators_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Dataset>();
    send::<tessel_estimator::input::DatasetIterator>();
    let d = numbers(6).batch(2, true).unwrap();
    let it = d.iter();
    let got = std::thread::spawn(move || it.count()).join().unwrap();
    assert_eq!(got, 3);
}

#[test]
fn replicas_take_turns_on_one_pipeline_whatever_order_they_ask_in() {
    use tessel_estimator::estimator::infeed::replica_infeed_sources;
    let d = numbers(13).batch(2, true).unwrap(); // 6 batches: x = [0,1], [2,3], ...
    let first_x = |item: Option<tessel_runtime::feed::FeedItem>| -> i64 {
        let Literal::Tuple(t) = item.unwrap().unwrap() else {
            panic!("not a tuple")
        };
        t[0].as_array().unwrap().data.get_i64(0)
    };
    let mut s = replica_infeed_sources(&d, &["x"], 2, 0).unwrap();
    // Replica 1 asks first: it still gets the second batch of each step.
    assert_eq!(first_x(s[1].next()), 2);
    assert_eq!(first_x(s[1].next()), 6);
    assert_eq!(first_x(s[0].next()), 0);
    assert_eq!(first_x(s[0].next()), 4);
    assert_eq!(first_x(s[0].next()), 8);
    assert_eq!(first_x(s[1].next()), 10);
    assert!(s[0].next().is_none() && s[1].next().is_none());
    // Resuming at step 1 of 3 replicas starts at batch 3.
    let mut s = replica_infeed_sources(&d, &["x"], 3, 1).unwrap();
    assert_eq!(first_x(s[2].next()), 10);
    assert_eq!(first_x(s[0].next()), 6);
    assert!(s[1].next().is_some() && s[1].next().is_none());
    assert!(replica_infeed_sources(&d, &["x"], 0, 0).is_err());
}

#[test]
fn every_replica_hears_why_the_data_stopped() {
    use tessel_estimator::estimator::infeed::replica_infeed_sources;
    let d = numbers(6)
        .map(same_spec, 1, |e| {
            if dense(&e, 0).data.get_i64(0) == 2 {
                Err(DatasetError::source("decode", "bad pixel"))
            } else {
                Ok(e)
            }
        })
        .unwrap()
        .batch(1, true)
        .unwrap();
    let mut s = replica_infeed_sources(&d, &["x"], 2, 0).unwrap();
    assert!(s[0].next().unwrap().is_ok());
    assert!(s[1].next().unwrap().is_ok());
    for r in [1, 0] {
        let e = s[r].next().unwrap().unwrap_err();
        assert_eq!(e.to_string(), "decode: bad pixel", "replica {r}");
        // The dataset's own error, not only its text, reaches every replica.
        let tessel_runtime::feed::FeedError::Source(source) = &e else {
            panic!("replica {r}: {e:?} is not the dataset's error");
        };
        assert!(
            source.downcast_ref::<DatasetError>().is_some(),
            "replica {r}: {source:?}"
        );
    }
}

#[test]
fn a_panicking_generator_is_an_error() {
    let spec = numbers(1).element_spec().clone();
    let d = Dataset::from_generator(spec, || {
        let it: ElementIter = Box::new((0..3).map(|i| {
            if i == 1 {
                panic!("generator broke");
            }
            Ok(Element::new(vec![
                Value::Dense(Array::scalar_s32(i)),
                Value::Dense(Array::f32(&[2], vec![0.0, 0.0])),
            ]))
        }));
        Ok(it)
    });
    for d in [d.clone(), d.prefetch(2)] {
        let r: Vec<_> = d.iter().collect();
        assert_eq!(r.len(), 2);
        assert!(r[0].is_ok());
        let err = r[1].as_ref().unwrap_err();
        assert!(
            matches!(err, DatasetError::Panicked { op: "from_generator", index: 1, message } if message == "generator broke"),
            "{err}"
        );
    }
}

#[test]
fn the_runtime_infeed_thread_feeds_replicas_from_a_dataset() {
    use tessel_compiler::ir::Shape;
    use tessel_runtime::feed::{fill_infeed, HostFeed, HostQueues};
    let d = numbers(20)
        .map(same_spec, 2, times3)
        .unwrap()
        .batch(4, true)
        .unwrap()
        .prefetch(2);
    let sources =
        tessel_estimator::estimator::infeed::replica_infeed_sources(&d, &["x", "y"], 2, 0).unwrap();
    let (queues, _outfeed) = HostQueues::new(2, 4);
    fill_infeed(&queues, sources, 2);
    let shape = Shape::Tuple(vec![]);
    let mut got = vec![];
    for _step in 0..2 {
        for r in 0..2 {
            let Literal::Tuple(t) = queues.infeed(r, &shape).unwrap() else {
                panic!("not a tuple")
            };
            got.push(t[0].as_array().unwrap().data.clone());
            assert_eq!(t[1].as_array().unwrap().shape.dims.to_vec(), vec![4, 2]);
        }
    }
    let want: Vec<ArrayData> = (0..4)
        .map(|b| ArrayData::S32((0..4).map(|i| 3 * (4 * b + i)).collect()))
        .collect();
    assert_eq!(got, want);
    assert!(queues
        .infeed(0, &shape)
        .unwrap_err()
        .contains("all 2 values were fed"));
}
