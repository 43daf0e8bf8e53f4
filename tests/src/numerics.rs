//! Comparing values computed two ways (interpreter before and after optimization, or
//! against JAX's outputs) with the corpus tolerance, and pseudo-random test inputs.

use tessel_compiler::ir::{Array, Literal};

/// The corpus README's tolerance: |a - b| <= atol + rtol * |b|.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

pub const CORPUS_TOLERANCE: Tolerance = Tolerance {
    atol: 1e-5,
    rtol: 1e-4,
};

fn compare_arrays(path: &str, a: &Array, b: &Array, tol: Tolerance) -> Result<(), String> {
    if a.shape != b.shape {
        return Err(format!("{path}: shape {} vs {}", a.shape, b.shape));
    }
    let float = a.element_type().is_float();
    for i in 0..a.len() {
        let ok = if float {
            let (x, y) = (a.data.get_f64(i), b.data.get_f64(i));
            (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol.atol + tol.rtol * y.abs()
        } else {
            a.data.get_i64(i) == b.data.get_i64(i)
        };
        if !ok {
            return Err(format!(
                "{path}: element {i} differs: {} vs {}",
                a.data.get_f64(i),
                b.data.get_f64(i)
            ));
        }
    }
    Ok(())
}

/// Compares two literals leaf by leaf: floats within `tol` (NaN equals NaN), integers exactly.
pub fn compare_literals(a: &Literal, b: &Literal, tol: Tolerance) -> Result<(), String> {
    let (la, lb) = (a.leaves(), b.leaves());
    if la.len() != lb.len() {
        return Err(format!("{} leaves vs {}", la.len(), lb.len()));
    }
    for (i, (x, y)) in la.iter().zip(&lb).enumerate() {
        compare_arrays(&format!("output {i}"), x, y, tol)?;
    }
    Ok(())
}

/// Reproducible pseudo-random f32 values of shape `dims` (xorshift from `seed`): in [-2, 2)
/// when `levels` is 0, else only `levels` distinct integers from -1 on (many ties, as a
/// max-pool's windows need to test the select order).
pub fn pseudo_random_f32(dims: &[i64], seed: u32, levels: u32) -> Literal {
    let n: i64 = dims.iter().product();
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    let v = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            if levels > 0 {
                (s % levels) as f32 - 1.0
            } else {
                (s % 2000) as f32 / 500.0 - 2.0
            }
        })
        .collect();
    Literal::Array(Array::f32(dims, v))
}
