//! A device's block of a global array: which part it holds under a sharding, and copying it
//! out of the global array's bytes (split) or back into them (assemble).

use super::mesh::{Mesh, Sharding};
use super::{fail, ShardMapError};
use tessel_compiler::ir::{Array, ArrayData, ArrayShape};

/// Which part of a global array each device holds.
pub(super) struct Split<'a> {
    pub(super) mesh: &'a Mesh,
    pub(super) sharding: &'a Sharding,
}

impl Split<'_> {
    /// Number of pieces dimension `d` is split into, and device `r`'s piece index.
    pub(super) fn piece(&self, d: usize, device: usize) -> Result<(usize, usize), ShardMapError> {
        let mut count = 1;
        let mut index = 0;
        for axis in self.sharding.get(d).map(|v| v.as_slice()).unwrap_or(&[]) {
            let (i, size) = self.mesh.axis(axis)?;
            index = index * size + self.mesh.coordinate(device, i);
            count *= size;
        }
        Ok((count, index))
    }

    pub(super) fn is_replicated(&self) -> bool {
        self.sharding.iter().all(|axes| axes.is_empty())
    }

    /// The local shape and the offset of device `r`'s block in the global array.
    pub(super) fn block(
        &self,
        global: &ArrayShape,
        device: usize,
    ) -> Result<(ArrayShape, Vec<i64>), ShardMapError> {
        if self.sharding.len() != global.rank() && !self.sharding.is_empty() {
            return fail(format!(
                "a sharding of {} dimensions for an array {global}",
                self.sharding.len()
            ));
        }
        let mut dims = Vec::with_capacity(global.rank());
        let mut offsets = Vec::with_capacity(global.rank());
        for (d, &n) in global.dims.iter().enumerate() {
            let (count, index) = self.piece(d, device)?;
            if n % count as i64 != 0 {
                return fail(format!(
                    "dimension {d} of {global} does not split into {count} equal parts"
                ));
            }
            let local = n / count as i64;
            dims.push(local);
            offsets.push(local * index as i64);
        }
        Ok((ArrayShape::new(global.element_type, &dims), offsets))
    }
}

/// Copies the block of `global` at `offsets` with the dims of `local` out of (`extract`) or
/// into (`!extract`) `global`'s bytes.
pub(super) fn copy_block(
    global: &ArrayShape,
    global_bytes: &mut [u8],
    local: &ArrayShape,
    local_bytes: &mut [u8],
    offsets: &[i64],
    extract: bool,
) {
    let w = global.element_type.byte_size();
    let rank = global.rank();
    if local.element_count() == 0 {
        return;
    }
    if rank == 0 {
        if extract {
            local_bytes.copy_from_slice(&global_bytes[..w]);
        } else {
            global_bytes[..w].copy_from_slice(local_bytes);
        }
        return;
    }
    let gstrides = global.strides();
    let row = local.dims[rank - 1] as usize * w;
    let mut index = vec![0i64; rank - 1];
    let mut li = 0usize;
    loop {
        let mut off = offsets[rank - 1];
        for d in 0..rank - 1 {
            off += (offsets[d] + index[d]) * gstrides[d];
        }
        let g = off as usize * w;
        if extract {
            local_bytes[li..li + row].copy_from_slice(&global_bytes[g..g + row]);
        } else {
            global_bytes[g..g + row].copy_from_slice(&local_bytes[li..li + row]);
        }
        li += row;
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < local.dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

pub(super) fn from_bytes(shape: ArrayShape, bytes: &[u8]) -> Array {
    let data = ArrayData::from_le_bytes(shape.element_type, bytes).expect("whole elements");
    Array::new(shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_reassembles_blocks() {
        let mesh = Mesh {
            axes: vec![("r".into(), 2)],
        };
        let sharding = vec![vec![], vec!["r".to_string()]];
        let split = Split {
            mesh: &mesh,
            sharding: &sharding,
        };
        let global = Array::f32(&[2, 4], (0..8).map(|x| x as f32).collect());
        let mut gbytes = global.data.to_le_bytes();
        let mut pieces = Vec::new();
        for r in 0..2 {
            let (local, offsets) = split.block(&global.shape, r).unwrap();
            let mut lbytes = vec![0u8; local.byte_size() as usize];
            copy_block(
                &global.shape,
                &mut gbytes,
                &local,
                &mut lbytes,
                &offsets,
                true,
            );
            pieces.push(from_bytes(local, &lbytes));
        }
        assert_eq!(pieces[0], Array::f32(&[2, 2], vec![0., 1., 4., 5.]));
        assert_eq!(pieces[1], Array::f32(&[2, 2], vec![2., 3., 6., 7.]));
        let mut back = vec![0u8; 32];
        for (r, p) in pieces.iter().enumerate() {
            let (local, offsets) = split.block(&global.shape, r).unwrap();
            let mut lbytes = p.data.to_le_bytes();
            copy_block(
                &global.shape,
                &mut back,
                &local,
                &mut lbytes,
                &offsets,
                false,
            );
        }
        assert_eq!(from_bytes(global.shape.clone(), &back), global);
    }
}
