//! `convert` (value conversion with HLO's rules) and `bitcast-convert` (same bits).

use super::element::{for_each_type, typed, Elem};
use super::{err, EvalResult};
use crate::ir::{Array, ArrayData, ArrayShape, ElementType};

/// Converts every element to `to`: integers wrap to the narrower type, floats to integers
/// truncate toward zero and saturate (NaN gives 0), integers to floats round to nearest even,
/// anything to `pred` is `x != 0` (NaN is true).
pub(crate) fn convert(a: &Array, to: ElementType) -> EvalResult<Array> {
    let data = convert_data(&a.data, to);
    Ok(Array::new(a.shape.with_element_type(to), data))
}

pub(crate) fn convert_data(data: &ArrayData, to: ElementType) -> ArrayData {
    if data.element_type() == to {
        return data.clone();
    }
    for_each_type!(to, D => {
        let out: Vec<D> = for_each_type!(data.element_type(), S => {
            S::slice(data)
                .expect("type")
                .iter()
                .map(|&x| D::from_scalar(x.to_scalar()))
                .collect()
        });
        D::wrap(out)
    })
}

/// Reinterprets the bytes of `a` as `out` (which may add or drop a last dimension when the
/// element widths differ, as HLO allows).
pub(crate) fn bitcast_convert(a: &Array, out: &ArrayShape) -> EvalResult<Array> {
    let bytes = a.data.to_le_bytes();
    if bytes.len() as i64 != out.byte_size() {
        return err(format!(
            "bitcast-convert from {} to {} changes the byte size",
            a.shape, out
        ));
    }
    let data = ArrayData::from_le_bytes(out.element_type, &bytes)
        .ok_or_else(|| super::EvalError::new("bitcast-convert: bytes do not divide"))?;
    Ok(Array::new(out.clone(), data))
}

/// Casts an array of one element type to another with the `convert` rules, borrowing when
/// it already has that type.
pub(crate) fn as_type<T: Elem>(a: &Array) -> EvalResult<std::borrow::Cow<'_, [T]>> {
    if a.element_type() == T::TYPE {
        return Ok(std::borrow::Cow::Borrowed(typed::<T>(a)?));
    }
    match T::slice(&convert_data(&a.data, T::TYPE)) {
        Some(v) => Ok(std::borrow::Cow::Owned(v.to_vec())),
        None => unreachable!(),
    }
}
