//! `dot` with general dimension numbers: result dimensions are the batch dimensions (in lhs
//! order), then lhs's free dimensions, then rhs's free dimensions.

use super::util::{
    check_dimension_list, dim, err, expect_array, expect_operands, list, make_array, merge_dim,
    sizes_compatible, Result,
};
use crate::ir::{DotDimensionNumbers, Shape};

pub(crate) fn dot(dn: &DotDimensionNumbers, operands: &[&Shape]) -> Result<Shape> {
    let name = "dot";
    expect_operands(name, operands, 2)?;
    let lhs = expect_array(name, "lhs", operands[0])?;
    let rhs = expect_array(name, "rhs", operands[1])?;
    let both = list(operands);
    if lhs.element_type != rhs.element_type {
        return err(format!(
            "dot: operand element types differ: {both}; convert one operand first"
        ));
    }
    if dn.lhs_batch.len() != dn.rhs_batch.len() {
        return err(format!(
            "dot: lhs_batch_dims={:?} and rhs_batch_dims={:?} must have equal length \
             (operands {both})",
            dn.lhs_batch, dn.rhs_batch
        ));
    }
    if dn.lhs_contracting.len() != dn.rhs_contracting.len() {
        return err(format!(
            "dot: lhs_contracting_dims={:?} and rhs_contracting_dims={:?} must have equal \
             length (operands {both})",
            dn.lhs_contracting, dn.rhs_contracting
        ));
    }
    let lhs_used: Vec<i64> = dn
        .lhs_batch
        .iter()
        .chain(&dn.lhs_contracting)
        .copied()
        .collect();
    let rhs_used: Vec<i64> = dn
        .rhs_batch
        .iter()
        .chain(&dn.rhs_contracting)
        .copied()
        .collect();
    check_dimension_list(
        name,
        "lhs batch/contracting dimension",
        &lhs_used,
        lhs.rank(),
        operands[0],
    )?;
    check_dimension_list(
        name,
        "rhs batch/contracting dimension",
        &rhs_used,
        rhs.rank(),
        operands[1],
    )?;

    let mut dims = Vec::new();
    for (kind, l_dims, r_dims) in [
        ("batch", &dn.lhs_batch, &dn.rhs_batch),
        ("contracting", &dn.lhs_contracting, &dn.rhs_contracting),
    ] {
        for (&l, &r) in l_dims.iter().zip(r_dims.iter()) {
            let (ld, rd) = (dim(lhs, l as usize), dim(rhs, r as usize));
            if !sizes_compatible(ld.0, rd.0) {
                return err(format!(
                    "dot: {kind} dimension {l} of lhs has size {} but {kind} dimension {r} of \
                     rhs has size {} (operands {both})",
                    ld.0, rd.0
                ));
            }
            if kind == "batch" {
                dims.push(merge_dim(ld, rd));
            }
        }
    }
    for (a, used) in [(lhs, &lhs_used), (rhs, &rhs_used)] {
        for d in 0..a.rank() {
            if !used.contains(&(d as i64)) {
                dims.push(dim(a, d));
            }
        }
    }
    Ok(Shape::Array(make_array(lhs.element_type, &dims)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ArrayShape;
    use crate::ir::ElementType::{self, *};

    fn s(t: ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    fn dn(lb: &[i64], rb: &[i64], lc: &[i64], rc: &[i64]) -> DotDimensionNumbers {
        DotDimensionNumbers {
            lhs_batch: lb.to_vec(),
            rhs_batch: rb.to_vec(),
            lhs_contracting: lc.to_vec(),
            rhs_contracting: rc.to_vec(),
        }
    }

    #[test]
    fn matmul_and_transposed_forms() {
        let a = s(F32, &[8, 784]);
        let w = s(F32, &[784, 128]);
        assert_eq!(
            dot(&dn(&[], &[], &[1], &[0]), &[&a, &w]).unwrap(),
            s(F32, &[8, 128])
        );
        // Contracting the leading dimension of both (a gradient of a weight).
        let g = s(F32, &[8, 10]);
        let h = s(F32, &[8, 128]);
        assert_eq!(
            dot(&dn(&[], &[], &[0], &[0]), &[&g, &h]).unwrap(),
            s(F32, &[10, 128])
        );
    }

    #[test]
    fn batch_dims_come_first() {
        let a = s(F32, &[5, 2, 3, 7]);
        let b = s(F32, &[7, 3, 5, 4]);
        let r = dot(&dn(&[0, 3], &[2, 0], &[2], &[1]), &[&a, &b]).unwrap();
        assert_eq!(r, s(F32, &[5, 7, 2, 4]));
    }

    #[test]
    fn mismatched_contracting_sizes_name_both_shapes() {
        let e = dot(
            &dn(&[], &[], &[1], &[0]),
            &[&s(F32, &[2, 3]), &s(F32, &[4, 5])],
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("contracting dimension 1 of lhs has size 3"),
            "{e}"
        );
        assert!(e.message.contains("f32[2,3] and f32[4,5]"), "{e}");
        let e = dot(
            &dn(&[], &[], &[2], &[0]),
            &[&s(F32, &[2, 3]), &s(F32, &[3, 5])],
        )
        .unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        let e = dot(
            &dn(&[], &[], &[1], &[0]),
            &[&s(F32, &[2, 3]), &s(BF16, &[3, 5])],
        )
        .unwrap_err();
        assert!(e.message.contains("f32[2,3] and bf16[3,5]"), "{e}");
        let e = dot(
            &dn(&[0], &[], &[1], &[0]),
            &[&s(F32, &[2, 3]), &s(F32, &[3, 5])],
        )
        .unwrap_err();
        assert!(e.message.contains("equal length"), "{e}");
    }

    #[test]
    fn dynamic_batch_dimension_is_kept() {
        let mut a = ArrayShape::new(F32, &[16, 3]);
        a.dynamic = [true, false].into_iter().collect();
        let r = dot(
            &dn(&[], &[], &[1], &[0]),
            &[&Shape::Array(a), &s(F32, &[3, 2])],
        )
        .unwrap();
        let r = r.as_array().unwrap();
        assert!(r.is_dynamic_dim(0) && !r.is_dynamic_dim(1));
    }
}
