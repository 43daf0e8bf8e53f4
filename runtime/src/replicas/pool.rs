//! The arrays a run's collectives reuse from step to step.
//!
//! A collective step of a training loop moves the same few large arrays every time: each
//! replica's operands read out of its arena (its deposit at the rendezvous), the reduced
//! result, and on several hosts the other hosts' deposits. Allocating them afresh each step
//! costs more than the reduction: glibc serves blocks of megabytes from the replica threads'
//! own arenas and gives them back to the kernel when they are freed, so every step faults the
//! pages in again. A run's hub keeps the arrays its collectives are done with here, and the
//! next step takes them back when the element type and count match.
//!
//! Also here: copying an arena's or a message's little-endian bytes into an array's existing
//! storage and back, so that neither direction allocates.

use std::sync::{Arc, Mutex};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, Literal};
use tessel_compiler::with_array_data;

/// How many arrays a pool keeps at most: a step's deposits and results for a few dozen
/// collective operands; beyond that the oldest are freed.
const KEEP: usize = 64;

/// How many arrays of one element type and count it keeps: a step's deposits and results
/// of one operand on up to 4 local replicas. Arrays no collective takes back (an all-gather's
/// results) stay few.
const PER_CLASS: usize = 8;

/// How many bytes of arrays it keeps at most.
const KEEP_BYTES: usize = 512 << 20;

/// Spare arrays of one run (see the module's note).
#[derive(Default)]
pub(crate) struct SparePool {
    arrays: Mutex<Vec<Array>>,
}

impl SparePool {
    /// An array of `shape` made from a kept one of the same element type and count (its
    /// elements are stale: the caller overwrites them all), or `None`.
    pub(crate) fn take(&self, shape: &ArrayShape) -> Option<Array> {
        let n = usize::try_from(shape.element_count()).ok()?;
        let mut arrays = self.arrays.lock().unwrap_or_else(|p| p.into_inner());
        let i = arrays
            .iter()
            .rposition(|a| a.element_type() == shape.element_type && a.len() == n)?;
        let mut a = arrays.swap_remove(i);
        a.shape = shape.clone();
        Some(a)
    }

    /// Keeps `a` for a later [`take`](Self::take).
    pub(crate) fn put(&self, a: Array) {
        if a.is_empty() {
            return;
        }
        let bytes = |a: &Array| a.len() * a.element_type().byte_size();
        if bytes(&a) > KEEP_BYTES {
            return;
        }
        let mut arrays = self.arrays.lock().unwrap_or_else(|p| p.into_inner());
        let same = |b: &&Array| b.element_type() == a.element_type() && b.len() == a.len();
        if arrays.iter().filter(same).count() >= PER_CLASS {
            return;
        }
        let mut held: usize = arrays.iter().map(bytes).sum();
        while !arrays.is_empty() && (arrays.len() >= KEEP || held + bytes(&a) > KEEP_BYTES) {
            held -= bytes(&arrays.remove(0));
        }
        arrays.push(a);
    }

    /// Keeps every array of `values` (tuples are taken apart).
    pub(crate) fn put_literals(&self, values: Vec<Literal>) {
        for v in values {
            match v {
                Literal::Array(a) => self.put(a),
                Literal::Tuple(t) => self.put_literals(t),
                Literal::Token => {}
            }
        }
    }

    /// Keeps the deposits of a finished exchange of which this caller holds the last
    /// reference (`Arc::into_inner` gives each to exactly one of the members handing it back).
    pub(crate) fn recycle(&self, deposits: Vec<Arc<Vec<Literal>>>) {
        for d in deposits {
            if let Some(values) = Arc::into_inner(d) {
                self.put_literals(values);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.arrays.lock().unwrap().len()
    }
}

/// An array of `shape` holding the little-endian `bytes`, in `spare`'s storage when it is
/// given (of `shape`'s element type and count); `None` when `bytes` do not fit the shape.
pub(crate) fn array_from_le_bytes(
    shape: &ArrayShape,
    bytes: &[u8],
    spare: Option<Array>,
) -> Option<Array> {
    let ty = shape.element_type;
    if bytes.len() != usize::try_from(shape.element_count()).ok()? * ty.byte_size() {
        return None;
    }
    match spare {
        Some(mut a) if a.element_type() == ty && a.len() * ty.byte_size() == bytes.len() => {
            fill_from_le_bytes(&mut a.data, bytes);
            a.shape = shape.clone();
            Some(a)
        }
        _ => Some(Array::new(
            shape.clone(),
            ArrayData::from_le_bytes(ty, bytes)?,
        )),
    }
}

/// Overwrites `data` with the little-endian `bytes` (exactly its size).
fn fill_from_le_bytes(data: &mut ArrayData, bytes: &[u8]) {
    match data {
        // A pred is stored as `bool`: any non-zero byte is true, as `from_le_bytes` reads it.
        ArrayData::Pred(v) => v.iter_mut().zip(bytes).for_each(|(x, &b)| *x = b != 0),
        _ if cfg!(target_endian = "little") => with_array_data!(data, v => {
            debug_assert_eq!(std::mem::size_of_val(v.as_slice()), bytes.len());
            // SAFETY: every element type but pred is plain bits of its byte size (integers,
            // floats, and half's transparent u16 wrappers), so any bytes are a valid value,
            // and `bytes` is exactly the vector's size (checked by the callers).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    v.as_mut_ptr().cast::<u8>(),
                    bytes.len(),
                )
            }
        }),
        _ => {
            if let Some(d) = ArrayData::from_le_bytes(data.element_type(), bytes) {
                *data = d;
            }
        }
    }
}

/// Calls `f` with `data` as little-endian bytes: its own storage on a little-endian machine
/// (no copy), else a converted copy.
pub(crate) fn with_le_bytes<R>(data: &ArrayData, f: impl FnOnce(&[u8]) -> R) -> R {
    match data {
        ArrayData::Pred(_) => f(&data.to_le_bytes()),
        _ if cfg!(target_endian = "little") => with_array_data!(data, v => {
            // SAFETY: non-pred element types are plain bits (see `fill_from_le_bytes`), and
            // on a little-endian machine their in-memory bytes are the little-endian form.
            let bytes = unsafe {
                std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v.as_slice()))
            };
            f(bytes)
        }),
        _ => f(&data.to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::ir::ElementType;

    fn f32s(v: &[f32]) -> Array {
        Array::f32(&[v.len() as i64], v.to_vec())
    }

    #[test]
    fn a_spare_is_handed_out_only_for_its_element_type_and_count() {
        let pool = SparePool::default();
        pool.put(f32s(&[1.0, 2.0, 3.0]));
        assert!(pool
            .take(&ArrayShape::new(ElementType::F32, &[4]))
            .is_none());
        assert!(pool
            .take(&ArrayShape::new(ElementType::S32, &[3]))
            .is_none());
        let got = pool
            .take(&ArrayShape::new(ElementType::F32, &[3, 1]))
            .expect("an f32 array of 3 was kept");
        assert_eq!(got.shape, ArrayShape::new(ElementType::F32, &[3, 1]));
        assert_eq!(pool.len(), 0);
        assert!(pool
            .take(&ArrayShape::new(ElementType::F32, &[3]))
            .is_none());
    }

    #[test]
    fn deposits_are_kept_once_by_the_last_holder() {
        let pool = SparePool::default();
        let d = Arc::new(vec![
            Literal::Array(f32s(&[1.0, 2.0])),
            Literal::Tuple(vec![Literal::Array(f32s(&[3.0])), Literal::Token]),
        ]);
        let other = d.clone();
        pool.recycle(vec![d]);
        assert_eq!(pool.len(), 0, "another member still reads the deposit");
        pool.recycle(vec![other]);
        assert_eq!(pool.len(), 2);
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_of_arrays() {
        let pool = SparePool::default();
        for n in 1..(KEEP + 10) {
            pool.put(f32s(&vec![0.0; n]));
        }
        assert_eq!(pool.len(), KEEP);
        // Of one element type and count, at most PER_CLASS.
        let pool = SparePool::default();
        for _ in 0..(PER_CLASS + 5) {
            pool.put(f32s(&[1.0, 2.0]));
        }
        assert_eq!(pool.len(), PER_CLASS);
    }

    #[test]
    fn bytes_fill_a_spare_bit_for_bit_and_come_back_unchanged() {
        let nan = f32::from_bits(0x7fc0_1234);
        let a = f32s(&[1.5, -0.0, nan, f32::MIN_POSITIVE / 2.0]);
        let bytes = a.data.to_le_bytes();
        let shape = ArrayShape::new(ElementType::F32, &[2, 2]);
        let spare = f32s(&[9.0; 4]);
        let b = array_from_le_bytes(&shape, &bytes, Some(spare)).unwrap();
        assert_eq!(b.shape, shape);
        with_le_bytes(&b.data, |back| assert_eq!(back, &bytes[..]));
        // A spare of another size is not used; bytes that do not fit the shape are refused.
        let c = array_from_le_bytes(&shape, &bytes, Some(f32s(&[0.0]))).unwrap();
        with_le_bytes(&c.data, |back| assert_eq!(back, &bytes[..]));
        assert!(array_from_le_bytes(&shape, &bytes[..12], None).is_none());
        let preds = ArrayShape::new(ElementType::Pred, &[3]);
        let spare = Array::new(preds.clone(), ArrayData::Pred(vec![false; 3]));
        let p = array_from_le_bytes(&preds, &[1, 0, 7], Some(spare)).unwrap();
        assert_eq!(p.data, ArrayData::Pred(vec![true, false, true]));
    }
}
