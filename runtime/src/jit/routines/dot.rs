//! Matrix products for `dot`: the generated program calls [`dot_routine`] with a plan made at
//! compile time. Operands whose batch / free / contracting dimensions are not each one
//! strided run are first permuted into scratch space; everything else goes to the kernels
//! crate's GEMM (`tessel_kernels::gemm`) with strides, no copies, except a large f32 right
//! operand stored transposed (contracted along its rows, as a dense layer's data gradient
//! reads its kernel): the `gemm` crate gathers it with a cache-hostile stride, so the product
//! runs in column bands, each band of it transposed into a per-thread buffer that stays in
//! cache (`gemm::transposed_rhs`).

use crate::jit::buffer::Addr;
use crate::jit::host::{guarded, permute_copy, resolve, Status};
use crate::jit::JitError;
use tessel_compiler::ir::{ArrayShape, DotDimensionNumbers, ElementType};
use tessel_kernels::gemm::transposed_rhs::{
    copies_transposed_rhs, sgemm_transposed_rhs, transposed_rhs_scratch_len,
};
use tessel_kernels::gemm::{dgemm, igemm_wrapping, sgemm, GemmBackend};

/// One dot operand: where it is, and how to see it as [batch, rows, cols].
#[derive(Clone, Debug)]
struct Operand {
    addr: Addr,
    dims: Vec<usize>,
    /// Permute into `scratch` first (row-major in this dimension order).
    permute: Option<(Vec<usize>, Addr)>,
    batch_stride: isize,
    rs: isize,
    cs: isize,
}

/// Everything `dot_routine` needs, decided at compile time.
#[derive(Clone, Debug)]
pub(crate) struct DotPlan {
    pub name: String,
    ty: ElementType,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    lhs: Operand,
    rhs: Operand,
    out: Addr,
    backend: GemmBackend,
    threads: usize,
    /// Scratch for the bands of the right operand transposed from `[n, k]` to `[k, n]` when
    /// it is stored transposed (see the module doc).
    rhs_copy: Option<Addr>,
}

/// The stride of a group of dimensions seen as one (row-major `strides`), or `None` when the
/// group is not a single strided run.
fn group_stride(group: &[usize], dims: &[usize], strides: &[usize]) -> Option<isize> {
    let g: Vec<usize> = group.iter().copied().filter(|&d| dims[d] != 1).collect();
    if g.is_empty() {
        return Some(0);
    }
    for w in g.windows(2) {
        if strides[w[0]] != strides[w[1]] * dims[w[1]] {
            return None;
        }
    }
    Some(strides[*g.last().unwrap()] as isize)
}

fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Plans one operand seen as [batch group, row group, col group]; `alloc` gives scratch space.
fn plan_operand(
    addr: Addr,
    shape: &ArrayShape,
    groups: [&[usize]; 3],
    alloc: &mut dyn FnMut(usize) -> Addr,
) -> Operand {
    let dims: Vec<usize> = shape.dims.iter().map(|&d| d as usize).collect();
    let strides = row_major_strides(&dims);
    let gs: Vec<Option<isize>> = groups
        .iter()
        .map(|g| group_stride(g, &dims, &strides))
        .collect();
    if gs.iter().all(|s| s.is_some()) {
        return Operand {
            addr,
            dims,
            permute: None,
            batch_stride: gs[0].unwrap(),
            rs: gs[1].unwrap(),
            cs: gs[2].unwrap(),
        };
    }
    let order: Vec<usize> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    let size = |g: &[usize]| g.iter().map(|&d| dims[d]).product::<usize>();
    let (rows, cols) = (size(groups[1]), size(groups[2]));
    let scratch = alloc(shape.byte_size() as usize);
    Operand {
        addr,
        dims,
        permute: Some((order, scratch)),
        batch_stride: (rows * cols) as isize,
        rs: cols as isize,
        cs: 1,
    }
}

impl DotPlan {
    /// Plans `out = dot(lhs, rhs)`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        name: &str,
        dnums: &DotDimensionNumbers,
        lhs: (Addr, &ArrayShape),
        rhs: (Addr, &ArrayShape),
        out: Addr,
        backend: GemmBackend,
        threads: usize,
        alloc: &mut dyn FnMut(usize) -> Addr,
    ) -> Result<DotPlan, JitError> {
        let ty = lhs.1.element_type;
        if !matches!(
            ty,
            ElementType::F32 | ElementType::F64 | ElementType::S32 | ElementType::U32
        ) || rhs.1.element_type != ty
        {
            return Err(JitError::Unsupported(format!(
                "dot of {ty} and {}",
                rhs.1.element_type
            )));
        }
        let u = |v: &[i64]| v.iter().map(|&d| d as usize).collect::<Vec<_>>();
        let (lb, lc, rb, rc) = (
            u(&dnums.lhs_batch),
            u(&dnums.lhs_contracting),
            u(&dnums.rhs_batch),
            u(&dnums.rhs_contracting),
        );
        let lfree: Vec<usize> = (0..lhs.1.rank())
            .filter(|d| !lb.contains(d) && !lc.contains(d))
            .collect();
        let rfree: Vec<usize> = (0..rhs.1.rank())
            .filter(|d| !rb.contains(d) && !rc.contains(d))
            .collect();
        let prod =
            |s: &ArrayShape, g: &[usize]| g.iter().map(|&d| s.dims[d] as usize).product::<usize>();
        let batch = prod(lhs.1, &lb);
        let (m, k, n) = (prod(lhs.1, &lfree), prod(lhs.1, &lc), prod(rhs.1, &rfree));
        if batch != prod(rhs.1, &rb) || k != prod(rhs.1, &rc) {
            return Err(JitError::Invalid(format!(
                "{name}: dot operand dimensions do not match"
            )));
        }
        let lhs_op = plan_operand(lhs.0, lhs.1, [&lb, &lfree, &lc], alloc);
        let rhs_op = plan_operand(rhs.0, rhs.1, [&rb, &rc, &rfree], alloc);
        let transposed_rhs =
            rhs_op.permute.is_none() && rhs_op.rs == 1 && rhs_op.cs >= k as isize && n > 1;
        let rhs_copy = (ty == ElementType::F32
            && backend == GemmBackend::Gemm
            && transposed_rhs
            && copies_transposed_rhs(m, n, k))
        .then(|| alloc(transposed_rhs_scratch_len(threads, n, k) * 4));
        Ok(DotPlan {
            name: name.to_string(),
            ty,
            batch,
            m,
            n,
            k,
            lhs: lhs_op,
            rhs: rhs_op,
            out,
            backend,
            threads,
            rhs_copy,
        })
    }

    /// Runs the product.
    ///
    /// # Safety
    /// `arena` must be the program's arena.
    pub(crate) unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
        let elem = self.ty.byte_size();
        let view = |op: &Operand| -> *const u8 {
            let src = resolve(op.addr, arena);
            match &op.permute {
                None => src,
                Some((order, scratch)) => {
                    let dst = resolve(*scratch, arena);
                    permute_copy(src, &op.dims, order, dst, elem);
                    dst
                }
            }
        };
        let a = view(&self.lhs);
        let b = view(&self.rhs);
        let c = resolve(self.out, arena);
        let (m, n, k) = (self.m, self.n, self.k);
        for bi in 0..self.batch {
            let ab = bi as isize * self.lhs.batch_stride;
            let bb = bi as isize * self.rhs.batch_stride;
            let cb = (bi * m * n) as isize;
            match (self.ty, self.rhs_copy) {
                (ElementType::F32, Some(copy)) => sgemm_transposed_rhs(
                    self.threads,
                    m,
                    n,
                    k,
                    (a as *const f32).offset(ab),
                    self.lhs.rs,
                    self.lhs.cs,
                    (b as *const f32).offset(bb),
                    self.rhs.cs as usize,
                    (c as *mut f32).offset(cb),
                    n as isize,
                    1,
                    false,
                    resolve(copy, arena) as *mut f32,
                ),
                (ElementType::F32, None) => sgemm(
                    self.backend,
                    self.threads,
                    m,
                    n,
                    k,
                    (a as *const f32).offset(ab),
                    self.lhs.rs,
                    self.lhs.cs,
                    (b as *const f32).offset(bb),
                    self.rhs.rs,
                    self.rhs.cs,
                    (c as *mut f32).offset(cb),
                    n as isize,
                    1,
                    false,
                ),
                (ElementType::F64, _) => dgemm(
                    m,
                    n,
                    k,
                    (a as *const f64).offset(ab),
                    self.lhs.rs,
                    self.lhs.cs,
                    (b as *const f64).offset(bb),
                    self.rhs.rs,
                    self.rhs.cs,
                    (c as *mut f64).offset(cb),
                ),
                // Integer dot: wrapping arithmetic, as XLA does.
                _ => igemm_wrapping(
                    m,
                    n,
                    k,
                    (a as *const i32).offset(ab),
                    self.lhs.rs,
                    self.lhs.cs,
                    (b as *const i32).offset(bb),
                    self.rhs.rs,
                    self.rhs.cs,
                    (c as *mut i32).offset(cb),
                ),
            }
        }
        Ok(())
    }
}

/// Called by generated code: `plan` is a `*const DotPlan` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `DotPlan` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn dot_routine(plan: *const DotPlan, arena: *mut u8) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scratch each plan asks for, with the dense layer's data gradient's layout
    /// (`[m, k] x [n, k]`, contracting both dimension 1) and its untransposed twin.
    fn scratch_of(m: i64, n: i64, k: i64, rhs_transposed: bool, backend: GemmBackend) -> usize {
        let dnums = DotDimensionNumbers {
            lhs_batch: vec![],
            rhs_batch: vec![],
            lhs_contracting: vec![1],
            rhs_contracting: vec![if rhs_transposed { 1 } else { 0 }],
        };
        let lhs = ArrayShape::new(ElementType::F32, &[m, k]);
        let rhs_dims = if rhs_transposed {
            vec![n, k]
        } else {
            vec![k, n]
        };
        let rhs = ArrayShape::new(ElementType::F32, &rhs_dims);
        let mut asked = 0;
        let mut alloc = |bytes: usize| {
            asked += bytes;
            Addr::Arena(0)
        };
        let at = Addr::Arena(0);
        DotPlan::new(
            "d",
            &dnums,
            (at, &lhs),
            (at, &rhs),
            at,
            backend,
            2,
            &mut alloc,
        )
        .unwrap();
        asked
    }

    /// A large f32 product with a transposed right operand transposes it band by band (one
    /// `k x band` buffer per thread, 2 threads); a small one, an untransposed one and one on
    /// `matrixmultiply` do not.
    #[test]
    fn a_large_transposed_rhs_is_transposed_in_bands() {
        let gemm = GemmBackend::Gemm;
        // Where tessel's packed product computes it (AVX2 without AVX-512), `b` is read in
        // place: its packing reads a transposed `b` in order.
        let banded = |m: usize, n: usize, k: usize, bytes: usize| {
            if copies_transposed_rhs(m, n, k) {
                bytes
            } else {
                0
            }
        };
        assert_eq!(
            scratch_of(256, 1024, 1024, true, gemm),
            banded(256, 1024, 1024, 2 * 1024 * 128 * 4)
        );
        assert_eq!(
            scratch_of(33, 70, 257, true, gemm),
            banded(33, 70, 257, 2 * 257 * 32 * 4)
        );
        assert_eq!(scratch_of(256, 1024, 1024, false, gemm), 0);
        assert_eq!(scratch_of(8, 8, 8, true, gemm), 0);
        assert_eq!(
            scratch_of(256, 1024, 1024, true, GemmBackend::MatrixMultiply),
            0
        );
    }
}
