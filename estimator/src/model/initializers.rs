//! Variables' initial values, computed on the host as TF's initializers define them.
//!
//! Random initializers draw from a Threefry-2x32 stream (see `threefry.rs`) whose key is
//! `threefry(seed_key(seed), fnv1a64(name))`: a pure function of the graph seed and the
//! variable's full name, so creating variables in another order, or adding one, changes no
//! other variable's value. With no `tf_random_seed` the seed is the process seed
//! ([`super::random::process_seed`]): one process is self-consistent, two processes differ.

use super::threefry::{name_hash, seed_key, threefry2x32, HostStream};
use super::variables::Initializer;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType};

/// Why an initializer cannot make a variable's value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InitializerError {
    #[error(
        "the initial value of `{name}` has shape {value}, but the variable's shape is {variable}"
    )]
    ValueShape {
        name: String,
        value: String,
        variable: String,
    },
    #[error("the {initializer} initializer of `{name}` makes floating-point values, but the variable is {element_type}")]
    NotFloat {
        name: String,
        initializer: &'static str,
        element_type: ElementType,
    },
    #[error("the initializer of `{name}` is invalid: {reason}")]
    Invalid { name: String, reason: String },
}

/// TF's `_compute_fans`: (fan_in, fan_out) of a weight shape. Dense kernels are `[in, out]`;
/// convolution kernels `[..spatial, in, out]` multiply both by the receptive field size.
pub(crate) fn fans(dims: &[i64]) -> (f64, f64) {
    match dims {
        [] => (1.0, 1.0),
        [n] => (*n as f64, *n as f64),
        [fan_in, fan_out] => (*fan_in as f64, *fan_out as f64),
        [spatial @ .., i, o] => {
            let receptive: i64 = spatial.iter().product();
            ((i * receptive) as f64, (o * receptive) as f64)
        }
    }
}

/// The name of an initializer for messages.
fn describe(init: &Initializer) -> &'static str {
    match init {
        Initializer::Zeros => "zeros",
        Initializer::Ones => "ones",
        Initializer::Constant(_) => "constant",
        Initializer::GlorotUniform => "glorot_uniform",
        Initializer::TruncatedNormal { .. } => "truncated_normal",
        Initializer::RandomNormal { .. } => "random_normal",
        Initializer::RandomUniform { .. } => "random_uniform",
        Initializer::Value(_) => "value",
    }
}

/// Checks that `init` can make a value of this shape and type (done when the variable is
/// created, so mistakes show at the model_fn's line rather than at the first run).
pub fn check(
    init: &Initializer,
    name: &str,
    dims: &[i64],
    element_type: ElementType,
) -> Result<(), InitializerError> {
    let invalid = |reason: String| InitializerError::Invalid {
        name: name.to_string(),
        reason,
    };
    match init {
        Initializer::Value(a) => {
            if a.shape.dims.as_slice() != dims || a.shape.element_type != element_type {
                return Err(InitializerError::ValueShape {
                    name: name.to_string(),
                    value: format!("{}{:?}", a.shape.element_type, a.shape.dims.as_slice()),
                    variable: format!("{element_type}{dims:?}"),
                });
            }
        }
        Initializer::Zeros | Initializer::Ones | Initializer::Constant(_) => {}
        random => {
            if !element_type.is_float() {
                return Err(InitializerError::NotFloat {
                    name: name.to_string(),
                    initializer: describe(random),
                    element_type,
                });
            }
            match *random {
                Initializer::TruncatedNormal { stddev, .. }
                | Initializer::RandomNormal { stddev, .. }
                    if !(stddev >= 0.0 && stddev.is_finite()) =>
                {
                    return Err(invalid(format!(
                        "the stddev must be finite and >= 0, got {stddev}"
                    )))
                }
                Initializer::RandomUniform { min, max } if !(min <= max && max.is_finite()) => {
                    return Err(invalid(format!(
                        "random_uniform needs min <= max, got [{min}, {max})"
                    )))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The stream of the variable `name` under `seed`.
pub(crate) fn variable_stream(seed: i64, name: &str) -> HostStream {
    let h = name_hash(name);
    HostStream::new(threefry2x32(seed_key(seed), [h as u32, (h >> 32) as u32]))
}

/// The initial value of the variable `name` of shape `dims` and type `element_type`.
pub fn initial_value(
    init: &Initializer,
    name: &str,
    dims: &[i64],
    element_type: ElementType,
    seed: i64,
) -> Result<Array, InitializerError> {
    check(init, name, dims, element_type)?;
    let shape = ArrayShape::new(element_type, dims);
    let n = shape.element_count() as usize;
    let mut stream = variable_stream(seed, name);
    let values: Vec<f64> = match *init {
        Initializer::Value(ref a) => return Ok(a.clone()),
        Initializer::Zeros => vec![0.0; n],
        Initializer::Ones => vec![1.0; n],
        Initializer::Constant(c) => vec![c; n],
        Initializer::GlorotUniform => {
            let (fan_in, fan_out) = fans(dims);
            let limit = (6.0 / (fan_in + fan_out).max(1.0)).sqrt();
            (0..n)
                .map(|_| -limit + 2.0 * limit * stream.uniform())
                .collect()
        }
        Initializer::RandomUniform { min, max } => (0..n)
            .map(|_| min + (max - min) * stream.uniform())
            .collect(),
        Initializer::RandomNormal { mean, stddev } => {
            (0..n).map(|_| mean + stddev * stream.normal()).collect()
        }
        Initializer::TruncatedNormal { mean, stddev } => (0..n)
            .map(|_| {
                // TF redraws values more than two standard deviations from the mean.
                let z = loop {
                    let z = stream.normal();
                    if z.abs() <= 2.0 {
                        break z;
                    }
                };
                mean + stddev * z
            })
            .collect(),
    };
    let data = ArrayData::from_f64_fn(element_type, n, |i| values[i]);
    Ok(Array::new(shape, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(init: Initializer, dims: &[i64], seed: i64) -> Vec<f64> {
        let a = initial_value(&init, "v", dims, ElementType::F32, seed).unwrap();
        (0..a.len()).map(|i| a.data.get_f64(i)).collect()
    }

    fn mean_var(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
    }

    #[test]
    fn fans_follow_tensorflow() {
        assert_eq!(fans(&[784, 10]), (784.0, 10.0));
        assert_eq!(fans(&[5, 5, 1, 32]), (25.0, 800.0));
        assert_eq!(fans(&[7]), (7.0, 7.0));
        assert_eq!(fans(&[]), (1.0, 1.0));
    }

    #[test]
    fn glorot_uniform_bounds_and_moments() {
        // conv kernel 5x5x32x64: fan_in 800, fan_out 1600, limit sqrt(6/2400) = 0.05.
        let v = values(Initializer::GlorotUniform, &[5, 5, 32, 64], 7);
        let limit = 0.05;
        assert!(v.iter().all(|x| x.abs() <= limit));
        let (m, var) = mean_var(&v);
        // Uniform(-l, l): mean 0, variance l^2/3; n = 51200, so sd of the mean ~ 1.3e-4.
        assert!(m.abs() < 6e-4, "{m}");
        assert!((var / (limit * limit / 3.0) - 1.0).abs() < 0.03, "{var}");
    }

    #[test]
    fn normal_and_truncated_normal_moments() {
        let v = values(
            Initializer::RandomNormal {
                mean: 1.0,
                stddev: 2.0,
            },
            &[200, 200],
            1,
        );
        let (m, var) = mean_var(&v);
        assert!(
            (m - 1.0).abs() < 0.04 && (var / 4.0 - 1.0).abs() < 0.03,
            "{m} {var}"
        );
        let t = values(
            Initializer::TruncatedNormal {
                mean: 0.0,
                stddev: 0.1,
            },
            &[200, 200],
            1,
        );
        assert!(t.iter().all(|x| x.abs() <= 0.2 + 1e-6));
        let (m, var) = mean_var(&t);
        // A standard normal truncated to [-2, 2] has variance 0.7737.
        assert!(
            m.abs() < 0.002 && (var / 0.01 / 0.7737 - 1.0).abs() < 0.03,
            "{m} {var}"
        );
    }

    #[test]
    fn uniform_bounds_and_constant_initializers() {
        let v = values(
            Initializer::RandomUniform {
                min: -3.0,
                max: 5.0,
            },
            &[10000],
            3,
        );
        assert!(v.iter().all(|&x| (-3.0..5.0).contains(&x)));
        assert!((mean_var(&v).0 - 1.0).abs() < 0.1);
        assert_eq!(values(Initializer::Ones, &[3], 0), vec![1.0; 3]);
        assert_eq!(values(Initializer::Constant(2.5), &[2], 0), vec![2.5; 2]);
        assert_eq!(values(Initializer::Zeros, &[2, 2], 0), vec![0.0; 4]);
    }

    #[test]
    fn deterministic_per_seed_and_name() {
        let a = initial_value(
            &Initializer::GlorotUniform,
            "a",
            &[4, 4],
            ElementType::F32,
            5,
        );
        let b = initial_value(
            &Initializer::GlorotUniform,
            "a",
            &[4, 4],
            ElementType::F32,
            5,
        );
        let c = initial_value(
            &Initializer::GlorotUniform,
            "b",
            &[4, 4],
            ElementType::F32,
            5,
        );
        let d = initial_value(
            &Initializer::GlorotUniform,
            "a",
            &[4, 4],
            ElementType::F32,
            6,
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn bad_initializers_are_errors() {
        let e = initial_value(&Initializer::GlorotUniform, "k", &[2], ElementType::S32, 0);
        assert!(matches!(e, Err(InitializerError::NotFloat { .. })));
        let v = Initializer::Value(Array::f32(&[2], vec![1.0, 2.0]));
        let e = initial_value(&v, "k", &[3], ElementType::F32, 0).unwrap_err();
        assert!(e.to_string().contains("shape"), "{e}");
        let bad = Initializer::RandomUniform { min: 1.0, max: 0.0 };
        assert!(initial_value(&bad, "k", &[3], ElementType::F32, 0).is_err());
    }
}
