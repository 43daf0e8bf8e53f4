//! The bytes that travel between hosts: literals (arrays bit for bit, tuples, tokens) and the
//! frames of the communication thread. A frame that cannot be decoded is an error naming what
//! is wrong, never a panic: it can only come from a peer that is not the same program.

use crate::replicas::pool::{array_from_le_bytes, with_le_bytes, SparePool};
use tessel_compiler::ir::{Array, ArrayShape, ElementType, Literal};

/// Appends to a frame.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) bytes: Vec<u8>,
}

impl Writer {
    /// A writer with room for `bytes` bytes, so that a frame of that size is written without
    /// growing its buffer.
    pub(crate) fn with_capacity(bytes: usize) -> Writer {
        Writer {
            bytes: Vec::with_capacity(bytes),
        }
    }

    /// How many bytes [`literals`](Self::literals) writes for `values`.
    pub(crate) fn literals_size(values: &[Literal]) -> usize {
        8 + values.iter().map(Self::literal_size).sum::<usize>()
    }

    fn literal_size(l: &Literal) -> usize {
        1 + match l {
            Literal::Array(a) => {
                let s = &a.shape;
                8 * (3 + s.dims.len()) + s.dynamic.len() + 8 + a.len() * s.element_type.byte_size()
            }
            Literal::Tuple(t) => Self::literals_size(t),
            Literal::Token => 0,
        }
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes.extend_from_slice(s.as_bytes());
    }

    pub(crate) fn literals(&mut self, values: &[Literal]) {
        self.u64(values.len() as u64);
        values.iter().for_each(|l| self.literal(l));
    }

    fn literal(&mut self, l: &Literal) {
        match l {
            Literal::Array(a) => {
                self.bytes.push(0);
                self.array(a);
            }
            Literal::Tuple(t) => {
                self.bytes.push(1);
                self.literals(t);
            }
            Literal::Token => self.bytes.push(2),
        }
    }

    fn array(&mut self, a: &Array) {
        let ty = ElementType::ALL
            .iter()
            .position(|&t| t == a.shape.element_type)
            .unwrap_or(0);
        self.u64(ty as u64);
        self.u64(a.shape.dims.len() as u64);
        a.shape.dims.iter().for_each(|&d| self.u64(d as u64));
        self.u64(a.shape.dynamic.len() as u64);
        self.bytes
            .extend(a.shape.dynamic.iter().map(|&d| u8::from(d)));
        with_le_bytes(&a.data, |data| {
            self.u64(data.len() as u64);
            self.bytes.extend_from_slice(data);
        });
    }
}

/// Reads a frame.
pub(crate) struct Reader<'b> {
    bytes: &'b [u8],
    /// Where decoded arrays take their storage from, when it has some of their size.
    spares: Option<&'b SparePool>,
}

fn short() -> String {
    "a message from another host is cut short".to_string()
}

impl<'b> Reader<'b> {
    pub(crate) fn new(bytes: &'b [u8]) -> Reader<'b> {
        Reader {
            bytes,
            spares: None,
        }
    }

    /// A reader whose arrays reuse `spares`' storage where it fits.
    pub(crate) fn with_spares(bytes: &'b [u8], spares: Option<&'b SparePool>) -> Reader<'b> {
        Reader { bytes, spares }
    }

    fn take(&mut self, n: usize) -> Result<&'b [u8], String> {
        if self.bytes.len() < n {
            return Err(short());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| short())?))
    }

    /// A count that must fit in what is left (each item takes at least `item_bytes`).
    fn count(&mut self, item_bytes: usize) -> Result<usize, String> {
        let n = self.u64()?;
        if n.saturating_mul(item_bytes as u64) > self.bytes.len() as u64 {
            return Err(short());
        }
        Ok(n as usize)
    }

    pub(crate) fn str(&mut self) -> Result<String, String> {
        let n = self.count(1)?;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    pub(crate) fn literals(&mut self) -> Result<Vec<Literal>, String> {
        let n = self.count(1)?;
        (0..n).map(|_| self.literal()).collect()
    }

    fn literal(&mut self) -> Result<Literal, String> {
        match self.take(1)?[0] {
            0 => Ok(Literal::Array(self.array()?)),
            1 => Ok(Literal::Tuple(self.literals()?)),
            2 => Ok(Literal::Token),
            k => Err(format!(
                "a message from another host holds a value of kind {k}"
            )),
        }
    }

    fn array(&mut self) -> Result<Array, String> {
        let ty = self.u64()? as usize;
        let ty = *ElementType::ALL
            .get(ty)
            .ok_or_else(|| format!("a message from another host names element type {ty}"))?;
        let rank = self.count(8)?;
        let dims: Vec<i64> = (0..rank)
            .map(|_| self.u64().map(|d| d as i64))
            .collect::<Result<_, _>>()?;
        let mut shape = ArrayShape::new(ty, &dims);
        let flags = self.count(1)?;
        shape.dynamic = self.take(flags)?.iter().map(|&b| b != 0).collect();
        let n = self.count(1)?;
        let bytes = self.take(n)?;
        if !shape.is_static() || shape.dims.iter().any(|&d| d < 0) {
            return Err(format!(
                "a message from another host holds an array of dims {:?}, not static",
                shape.dims
            ));
        }
        if shape.checked_byte_size() != Some(n as i64) {
            return Err(format!(
                "a message from another host holds {n} bytes for a {shape}"
            ));
        }
        let spare = self.spares.and_then(|p| p.take(&shape));
        array_from_le_bytes(&shape, bytes, spare)
            .ok_or_else(|| format!("a message from another host holds {n} bytes of {ty:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::ir::ArrayData;

    #[test]
    fn literals_travel_bit_for_bit() {
        let nan = f32::from_bits(0x7fc0_1234);
        let values = vec![
            Literal::Array(Array::new(
                ArrayShape::new(ElementType::F32, &[2, 2]),
                ArrayData::F32(vec![1.5, -0.0, nan, f32::MIN_POSITIVE / 2.0]),
            )),
            Literal::Tuple(vec![
                Literal::Array(Array::scalar_s32(-7)),
                Literal::Token,
                Literal::Tuple(vec![]),
            ]),
        ];
        let mut w = Writer::default();
        w.literals(&values);
        w.str("done");
        let mut r = Reader::new(&w.bytes);
        let back = r.literals().unwrap();
        assert_eq!(r.str().unwrap(), "done");
        let bits = |l: &Literal| match l {
            Literal::Array(a) => a.data.to_le_bytes(),
            _ => vec![],
        };
        assert_eq!(bits(&back[0]), bits(&values[0]));
        assert_eq!(back[1], values[1]);
        // The size is known before writing (a frame is written without growing its buffer).
        assert_eq!(w.bytes.len(), Writer::literals_size(&values) + 8 + 4);
        // Arrays decode into spares of their element type and count, bit for bit.
        let pool = SparePool::default();
        let spare = Array::f32(&[4], vec![7.0; 4]);
        let spare_ptr = match &spare.data {
            ArrayData::F32(v) => v.as_ptr(),
            _ => unreachable!(),
        };
        pool.put(spare);
        let mut r = Reader::with_spares(&w.bytes, Some(&pool));
        let again = r.literals().unwrap();
        assert_eq!(bits(&again[0]), bits(&values[0]));
        assert_eq!(
            again[0].as_array().unwrap().shape,
            ArrayShape::new(ElementType::F32, &[2, 2])
        );
        match &again[0].as_array().unwrap().data {
            ArrayData::F32(v) => assert_eq!(v.as_ptr(), spare_ptr, "the spare's storage"),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_cut_or_garbled_message_is_an_error() {
        let mut w = Writer::default();
        w.literals(&[Literal::Array(Array::scalar_s32(3))]);
        for cut in 0..w.bytes.len() {
            let e = Reader::new(&w.bytes[..cut]).literals().unwrap_err();
            assert!(e.contains("cut short"), "{e}");
        }
        let mut bad = w.bytes.clone();
        bad[8] = 9;
        let e = Reader::new(&bad).literals().unwrap_err();
        assert!(e.contains("kind 9"), "{e}");
        let mut huge = Writer::default();
        huge.u64(u64::MAX);
        assert!(Reader::new(&huge.bytes).literals().is_err());
    }
}
