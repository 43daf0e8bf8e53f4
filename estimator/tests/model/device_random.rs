//! Device randomness: its distribution, bitwise agreement with the host Threefry, and keys
//! that differ per step, per replica and per op while runs reproduce exactly, on the
//! interpreter and the JIT.

use crate::support::{run, scalar_step, values};
use tessel_compiler::ir::{Array, ArrayData, Module};
use tessel_estimator::model::random::{random_bits, random_uniform};
use tessel_estimator::model::threefry::{seed_key, threefry2x32};
use tessel_estimator::model::{Graph, Mode};
use tessel_runtime::session::{compile, Device, Outputs};

/// A module whose outputs are `ops` random tensors of `dims` (step is its only parameter).
fn random_module(seed: i64, dims: &[i64], ops: usize, bits: bool) -> Module {
    let mut g = Graph::new("random", Mode::Train, Some(seed));
    let outs: Vec<_> = (0..ops)
        .map(|_| match bits {
            true => random_bits(&mut g, dims),
            false => random_uniform(&mut g, dims),
        })
        .collect();
    let refs: Vec<_> = outs.iter().collect();
    g.tracer.finish(&refs).expect("traces")
}

fn u32s(a: &Array) -> Vec<u32> {
    match &a.data {
        ArrayData::U32(v) => v.clone(),
        other => panic!("not u32: {:?}", other.element_type()),
    }
}

#[test]
fn device_bits_are_the_host_threefry_bitwise() {
    let (seed, step, n) = (1234i64, 77i32, 7usize);
    let module = random_module(seed, &[n as i64], 2, true);
    let key = threefry2x32(seed_key(seed), [step as u32, 0]);
    for device in [Device::interpreter(), Device::jit()] {
        let out = run(&module, &device, vec![scalar_step(step)]);
        for (op, words) in out.iter().enumerate() {
            let half = n.div_ceil(2);
            let blocks: Vec<[u32; 2]> = (0..half)
                .map(|i| threefry2x32(key, [i as u32, op as u32]))
                .collect();
            let expected: Vec<u32> = blocks
                .iter()
                .map(|b| b[0])
                .chain(blocks.iter().map(|b| b[1]))
                .take(n)
                .collect();
            assert_eq!(u32s(words), expected, "op {op}");
        }
    }
}

#[test]
fn uniform_values_have_the_uniform_distribution() {
    let module = random_module(9, &[200, 500], 1, false);
    let u = values(&run(&module, &Device::jit(), vec![scalar_step(0)])[0]);
    let n = u.len() as f64;
    assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
    let mean = u.iter().sum::<f64>() / n;
    let var = u.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    // sd of the mean: sqrt(1/12 / 1e5) = 9e-4.
    assert!((mean - 0.5).abs() < 0.004, "{mean}");
    assert!((var * 12.0 - 1.0).abs() < 0.02, "{var}");
    // Chi-square over 20 bins, 19 degrees of freedom: P(chi2 > 43.8) = 0.001.
    let mut bins = [0f64; 20];
    for x in &u {
        bins[(x * 20.0) as usize] += 1.0;
    }
    let expected = n / 20.0;
    let chi2: f64 = bins.iter().map(|b| (b - expected).powi(2) / expected).sum();
    assert!(chi2 < 43.8, "chi-square {chi2}: {bins:?}");
}

#[test]
fn steps_and_ops_draw_differently_and_runs_reproduce() {
    let module = random_module(5, &[1000], 2, false);
    let jit = compile(&module, &Device::jit()).unwrap();
    let at = |step: i32| -> Vec<Array> {
        match jit
            .run(&jit.bind_ordered(vec![scalar_step(step)]).unwrap())
            .unwrap()
        {
            Outputs::Global(v) => v,
            Outputs::PerReplica(_) => unreachable!(),
        }
    };
    let (s1, s1_again, s2) = (at(1), at(1), at(2));
    assert_eq!(s1, s1_again);
    assert_ne!(s1[0], s2[0]);
    assert_ne!(
        s1[0], s1[1],
        "two dropout ops of one step must not share a mask"
    );
    // A second trace and compile, and the interpreter, give the same bits.
    let again = run(
        &random_module(5, &[1000], 2, false),
        &Device::jit(),
        vec![scalar_step(1)],
    );
    let interp = run(&module, &Device::interpreter(), vec![scalar_step(1)]);
    assert_eq!(s1, again);
    assert_eq!(s1, interp);
    // Another seed, other values.
    let other = run(
        &random_module(6, &[1000], 2, false),
        &Device::jit(),
        vec![scalar_step(1)],
    );
    assert_ne!(s1, other);
}

#[test]
fn replicas_draw_differently_and_both_backends_agree() {
    let module = random_module(5, &[64], 1, false);
    let per_replica = |device: Device| -> Vec<Vec<Array>> {
        let p = compile(&module, &device.with_replicas(2)).unwrap();
        match p
            .run(&p.bind_ordered(vec![scalar_step(3)]).unwrap())
            .unwrap()
        {
            Outputs::PerReplica(r) => r,
            Outputs::Global(_) => panic!("a per-replica program"),
        }
    };
    let interp = per_replica(Device::interpreter());
    let jit = per_replica(Device::jit());
    assert_eq!(interp, jit);
    assert_ne!(interp[0][0], interp[1][0]);
    // Replica 0 of two draws what a single replica draws.
    let single = run(&module, &Device::interpreter(), vec![scalar_step(3)]);
    assert_eq!(interp[0], single);
}

/// A measurement, not a timed test: the device cost of the guide's dropout mask
/// (`random_uniform` of [128, 128]; other shapes with `DIMS=1024,128`) per step on the JIT.
#[test]
#[ignore = "a measurement; run with --ignored --nocapture"]
fn measure_dropout_mask_cost() {
    let dims: Vec<i64> = std::env::var("DIMS")
        .map(|s| s.split(",").map(|d| d.parse().unwrap()).collect())
        .unwrap_or(vec![128, 128]);
    let module = random_module(1, &dims, 1, false);
    let p = compile(&module, &Device::jit()).unwrap();
    let inputs = p.bind_ordered(vec![scalar_step(1)]).unwrap();
    p.run(&inputs).unwrap();
    let runs = 500;
    let t = std::time::Instant::now();
    for _ in 0..runs {
        p.run(&inputs).unwrap();
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / runs as f64;
    println!("random_uniform {dims:?} on the JIT: {us:.1} us per run");
}
