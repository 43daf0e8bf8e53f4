//! The few typed-buffer operations the pipeline needs on [`ArrayData`] whatever its element
//! type: cut rows out of a column, append one element's data to a batch being built (the one
//! copy an element makes on its way to infeed), and pad with zeros.

use tessel_compiler::ir::{ArrayData, ElementType};
use tessel_compiler::with_array_data;

/// Elements `start..start + len` of `data`, as data of the same type.
pub(crate) fn copy_range(data: &ArrayData, start: usize, len: usize) -> ArrayData {
    let mut out = empty_with_capacity(data.element_type(), len);
    append(&mut out, data, start, len);
    out
}

/// Empty data of type `ty` with room for `n` elements, so a batch is built without regrowing.
pub(crate) fn empty_with_capacity(ty: ElementType, n: usize) -> ArrayData {
    let mut data = ArrayData::zeros(ty, 0);
    with_array_data!(&mut data, v => v.reserve_exact(n));
    data
}

/// Appends `src[start..start + len]` to `dst`; false when the element types differ.
pub(crate) fn append(dst: &mut ArrayData, src: &ArrayData, start: usize, len: usize) -> bool {
    macro_rules! same {
        ($($v:ident),*) => {
            match (dst, src) {
                $((ArrayData::$v(d), ArrayData::$v(s)) => {
                    d.extend_from_slice(&s[start..start + len]);
                    true
                })*
                _ => false,
            }
        };
    }
    same!(Pred, S8, U8, S16, U16, S32, U32, S64, U64, F16, BF16, F32, F64)
}

/// Appends `n` zeros (false, 0, 0.0) to `dst`.
pub(crate) fn append_zeros(dst: &mut ArrayData, n: usize) {
    let zeros = ArrayData::zeros(dst.element_type(), n);
    append(dst, &zeros, 0, n);
}
