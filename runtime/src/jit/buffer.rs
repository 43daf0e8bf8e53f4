//! Where a value lives while a compiled program runs.

use tessel_compiler::ir::ArrayShape;

/// The address of an array buffer: an offset in the program's arena, or an absolute address
/// of memory the executable owns (constants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Addr {
    Arena(usize),
    Absolute(usize),
}

/// One array buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub addr: Addr,
    pub shape: ArrayShape,
}

impl Buffer {
    pub fn byte_size(&self) -> usize {
        self.shape.byte_size() as usize
    }
}

/// The location of any value: an array buffer, a tuple of locations, or a token.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Loc {
    Array(Buffer),
    Tuple(Vec<Loc>),
    Token,
}

impl Loc {
    pub(crate) fn as_array(&self) -> Option<&Buffer> {
        match self {
            Loc::Array(b) => Some(b),
            _ => None,
        }
    }

    /// Array buffers depth-first.
    pub(crate) fn leaves(&self) -> Vec<&Buffer> {
        let mut out = Vec::new();
        fn walk<'a>(l: &'a Loc, out: &mut Vec<&'a Buffer>) {
            match l {
                Loc::Array(b) => out.push(b),
                Loc::Tuple(t) => t.iter().for_each(|l| walk(l, out)),
                Loc::Token => {}
            }
        }
        walk(self, &mut out);
        out
    }
}

/// Bytes of constant data the executable keeps alive; compiled code refers to them by address.
#[derive(Default)]
pub(crate) struct ConstPool {
    blocks: Vec<Box<[u64]>>,
}

impl ConstPool {
    /// Stores `bytes` (8-byte aligned) and returns their address.
    pub(crate) fn add(&mut self, bytes: &[u8]) -> usize {
        let mut block = vec![0u64; bytes.len().div_ceil(8).max(1)].into_boxed_slice();
        let dst =
            unsafe { std::slice::from_raw_parts_mut(block.as_mut_ptr() as *mut u8, bytes.len()) };
        dst.copy_from_slice(bytes);
        let addr = block.as_ptr() as usize;
        self.blocks.push(block);
        addr
    }

    pub(crate) fn total_bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.len() * 8).sum()
    }
}
