//! Matrix products for `dot` (and convolution): the generated program calls [`dot_routine`]
//! with a plan made at compile time. Operands whose batch / free / contracting dimensions are
//! not each one strided run are first permuted into scratch space; everything else goes to the
//! GEMM library with strides, no copies.

use super::buffer::Addr;
use super::host::{guarded, permute_copy, resolve, Status};
use super::JitError;
use tessel_compiler::ir::{ArrayShape, DotDimensionNumbers, ElementType};

/// The GEMM library behind dot and convolution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GemmBackend {
    /// The `gemm` crate (runtime-dispatched AVX2/FMA/AVX-512 kernels).
    #[default]
    Gemm,
    /// The `matrixmultiply` crate.
    MatrixMultiply,
}

impl GemmBackend {
    pub fn parse(s: &str) -> Option<GemmBackend> {
        match s {
            "gemm" => Some(GemmBackend::Gemm),
            "matrixmultiply" => Some(GemmBackend::MatrixMultiply),
            _ => None,
        }
    }
}

/// `c = a * b` (or `c += a * b`) for f32 matrices given by pointers and strides in elements.
///
/// # Safety
/// The pointers must address `m x k`, `k x n` and `m x n` matrices with these strides.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm(
    backend: GemmBackend,
    threads: usize,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    *c.offset(i as isize * rsc + j as isize * csc) = 0.0;
                }
            }
        }
        return;
    }
    match backend {
        GemmBackend::Gemm => {
            let par = if threads > 1 && (m * n * k) >= (1 << 18) {
                gemm::Parallelism::Rayon(threads)
            } else {
                gemm::Parallelism::None
            };
            gemm::gemm(
                m, n, k, c, csc, rsc, accumulate, a, csa, rsa, b, csb, rsb, 1.0f32, 1.0f32, false,
                false, false, par,
            );
        }
        GemmBackend::MatrixMultiply => {
            let beta = if accumulate { 1.0 } else { 0.0 };
            matrixmultiply::sgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
        }
    }
}

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
pub struct DotPlan {
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
    pub fn new(
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
        })
    }

    /// Runs the product.
    ///
    /// # Safety
    /// `arena` must be the program's arena.
    pub unsafe fn run(&self, arena: *mut u8) -> Result<(), String> {
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
            match self.ty {
                ElementType::F32 => sgemm(
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
                ElementType::F64 => {
                    let (a, b, c) = (
                        (a as *const f64).offset(ab),
                        (b as *const f64).offset(bb),
                        (c as *mut f64).offset(cb),
                    );
                    if m > 0 && n > 0 && k > 0 {
                        gemm::gemm(
                            m,
                            n,
                            k,
                            c,
                            1,
                            n as isize,
                            false,
                            a,
                            self.lhs.cs,
                            self.lhs.rs,
                            b,
                            self.rhs.cs,
                            self.rhs.rs,
                            1.0f64,
                            1.0f64,
                            false,
                            false,
                            false,
                            gemm::Parallelism::None,
                        );
                    } else {
                        for i in 0..m * n {
                            *c.add(i) = 0.0;
                        }
                    }
                }
                _ => {
                    // Integer dot: wrapping arithmetic, as XLA does.
                    let (a, b, c) = (
                        (a as *const i32).offset(ab),
                        (b as *const i32).offset(bb),
                        (c as *mut i32).offset(cb),
                    );
                    for i in 0..m {
                        for j in 0..n {
                            let mut acc = 0i32;
                            for p in 0..k {
                                let x =
                                    *a.offset(i as isize * self.lhs.rs + p as isize * self.lhs.cs);
                                let y =
                                    *b.offset(p as isize * self.rhs.rs + j as isize * self.rhs.cs);
                                acc = acc.wrapping_add(x.wrapping_mul(y));
                            }
                            *c.add(i * n + j) = acc;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Called by generated code: `plan` is a `*const DotPlan` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `DotPlan` and `arena` be the program's arena.
pub unsafe extern "C" fn dot_routine(plan: *const DotPlan, arena: *mut u8) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || unsafe { plan.run(arena) })
}
