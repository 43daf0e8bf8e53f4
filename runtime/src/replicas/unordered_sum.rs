//! The unordered all-reduce sum (`--fast-allreduce`): a host adds its members' f32 or f64
//! operands in replica-id order into one packed 1-D array, the transport's all-reduce (MPI's)
//! adds the hosts' partial sums in an order of its own, and every member unpacks the total
//! into arrays of its operands' shapes. Not bitwise reproducible across host counts; the
//! default path (gather, then add in replica-id order) is.

use super::pool::SparePool;
use std::sync::Arc;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal};

/// The element-wise sum of `deposits` (each a member's operands, in the order to add them),
/// packed operand after operand into one 1-D array, in a spare when `spare` has one.
pub(crate) fn partial_sums(
    deposits: &[Arc<Vec<Literal>>],
    spare: &dyn Fn(&ArrayShape) -> Option<Array>,
) -> Result<Array, String> {
    let first = deposits
        .first()
        .ok_or("an unordered sum needs at least one deposit")?;
    let leading = arrays(first)?;
    let ty = leading
        .first()
        .map(|a| a.element_type())
        .ok_or("an unordered sum needs an operand")?;
    let total: usize = leading.iter().map(|a| a.len()).sum();
    for d in deposits {
        let these = arrays(d)?;
        let fits = these.len() == leading.len()
            && these
                .iter()
                .zip(&leading)
                .all(|(a, b)| a.shape == b.shape && a.element_type() == ty);
        if !fits {
            return Err(
                "replicas contribute operands of different shapes to one all-reduce".into(),
            );
        }
    }
    let shape = ArrayShape::new(ty, &[total as i64]);
    let mut out = spare(&shape).unwrap_or_else(|| Array::zeros(shape));
    macro_rules! add_up {
        ($variant:ident) => {{
            let ArrayData::$variant(acc) = &mut out.data else {
                return Err(format!("an unordered sum of {ty:?} needs one element type"));
            };
            for (i, d) in deposits.iter().enumerate() {
                let mut at = 0;
                for a in arrays(d)? {
                    let ArrayData::$variant(x) = &a.data else {
                        return Err(format!("an unordered sum of {ty:?} needs one element type"));
                    };
                    let dst = &mut acc[at..at + x.len()];
                    if i == 0 {
                        dst.copy_from_slice(x);
                    } else {
                        dst.iter_mut().zip(x).for_each(|(d, &x)| *d += x);
                    }
                    at += x.len();
                }
            }
        }};
    }
    match ty {
        ElementType::F32 => add_up!(F32),
        ElementType::F64 => add_up!(F64),
        other => return Err(format!("an unordered sum takes f32 or f64, not {other:?}")),
    }
    Ok(out)
}

/// A deposit's operands as arrays.
fn arrays(deposit: &[Literal]) -> Result<Vec<&Array>, String> {
    deposit
        .iter()
        .map(|l| {
            l.as_array()
                .ok_or_else(|| "an unordered sum takes arrays only".to_string())
        })
        .collect()
}

/// The packed `total` as arrays of `shapes`, in spares of `pool` where it has some.
pub(crate) fn unpack(
    total: &Array,
    shapes: &[ArrayShape],
    pool: &SparePool,
) -> Result<Vec<Literal>, String> {
    let mut at = 0;
    let mut out = Vec::with_capacity(shapes.len());
    for shape in shapes {
        let n = usize::try_from(shape.element_count()).map_err(|e| e.to_string())?;
        let piece = |a: &mut Array| -> Option<()> {
            match (&mut a.data, &total.data) {
                (ArrayData::F32(d), ArrayData::F32(s)) => d.copy_from_slice(s.get(at..at + n)?),
                (ArrayData::F64(d), ArrayData::F64(s)) => d.copy_from_slice(s.get(at..at + n)?),
                _ => return None,
            }
            Some(())
        };
        let mut a = pool
            .take(shape)
            .unwrap_or_else(|| Array::zeros(shape.clone()));
        piece(&mut a).ok_or_else(|| {
            format!(
                "the all-reduce's total ({} values of {:?}) does not hold a {shape} at {at}",
                total.len(),
                total.element_type()
            )
        })?;
        at += n;
        out.push(Literal::Array(a));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(dims: &[i64], v: &[f32]) -> Literal {
        Literal::Array(Array::f32(dims, v.to_vec()))
    }

    #[test]
    fn deposits_are_added_in_order_packed_and_unpacked() {
        let a = Arc::new(vec![f32s(&[2], &[1e8, 1.0]), f32s(&[1], &[0.5])]);
        let b = Arc::new(vec![f32s(&[2], &[-1e8, 2.0]), f32s(&[1], &[0.25])]);
        let c = Arc::new(vec![f32s(&[2], &[1.0, 3.0]), f32s(&[1], &[0.125])]);
        let total = partial_sums(&[a, b, c], &|_| None).unwrap();
        // (1e8 + -1e8) + 1 = 1, in this order (1e8 + 1 would lose the 1).
        assert_eq!(total.data, ArrayData::F32(vec![1.0, 6.0, 0.875]));
        let pool = SparePool::default();
        let shapes = [
            ArrayShape::new(ElementType::F32, &[2]),
            ArrayShape::new(ElementType::F32, &[1]),
        ];
        let out = unpack(&total, &shapes, &pool).unwrap();
        assert_eq!(out, vec![f32s(&[2], &[1.0, 6.0]), f32s(&[1], &[0.875])]);
        let too_many = [ArrayShape::new(ElementType::F32, &[4])];
        assert!(unpack(&total, &too_many, &pool).is_err());
    }

    #[test]
    fn mismatched_or_non_float_deposits_are_an_error() {
        let a = Arc::new(vec![f32s(&[2], &[1.0, 2.0])]);
        let b = Arc::new(vec![f32s(&[3], &[1.0, 2.0, 3.0])]);
        assert!(partial_sums(&[a.clone(), b], &|_| None).is_err());
        let ints = Arc::new(vec![Literal::Array(Array::scalar_s32(3))]);
        assert!(partial_sums(&[ints], &|_| None).is_err());
        assert!(partial_sums(&[], &|_| None).is_err());
    }
}
