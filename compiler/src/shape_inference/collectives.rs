//! Collectives: all-reduce, all-gather, reduce-scatter, collective-permute, all-to-all.

use super::util::{
    check_reducer, dim, err, expect_array, expect_operands, list, make_array, text, Result,
};
use crate::ir::{ArrayShape, CollectiveAttrs, ComputationId, Module, Shape, UNKNOWN_DIM};

fn groups_text(groups: &[Vec<i64>]) -> String {
    let inner: Vec<String> = groups
        .iter()
        .map(|g| {
            let ids: Vec<String> = g.iter().map(|i| i.to_string()).collect();
            format!("{{{}}}", ids.join(","))
        })
        .collect();
    format!("replica_groups={{{}}}", inner.join(","))
}

/// How many devices the ids in replica groups may name, when the module says.
fn device_count(module: &Module, attrs: &CollectiveAttrs) -> Option<i64> {
    let replicas = module.replica_count?;
    if attrs.use_global_device_ids {
        Some(replicas * module.num_partitions.unwrap_or(1))
    } else {
        Some(replicas)
    }
}

/// Replica groups: non-empty, ids in range, no id twice. With `uniform`, all groups must be
/// the same size (the result shape depends on it).
fn check_groups(name: &str, module: &Module, attrs: &CollectiveAttrs, uniform: bool) -> Result<()> {
    check_groups_of(name, attrs, device_count(module, attrs), uniform)
}

/// [`check_groups`] for groups whose ids may name `count` devices (unknown: `None`).
fn check_groups_of(
    name: &str,
    attrs: &CollectiveAttrs,
    count: Option<i64>,
    uniform: bool,
) -> Result<()> {
    let groups = &attrs.replica_groups;
    // XLA's group modes: global device ids (flattened ids) need a channel and explicit groups.
    if attrs.use_global_device_ids && attrs.channel_id.is_none() {
        return err(format!(
            "{name}: use_global_device_ids=true needs a channel_id (device ids are global only \
             across a channel)"
        ));
    }
    if attrs.use_global_device_ids && groups.is_empty() {
        return err(format!(
            "{name}: use_global_device_ids=true needs explicit replica_groups, got {}",
            groups_text(groups)
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for g in groups {
        if g.is_empty() {
            return err(format!(
                "{name}: {} has an empty group",
                groups_text(groups)
            ));
        }
        if uniform && g.len() != groups[0].len() {
            return err(format!(
                "{name}: {} must have groups of one size",
                groups_text(groups)
            ));
        }
        for &id in g {
            if id < 0 || count.is_some_and(|c| id >= c) {
                return err(format!(
                    "{name}: {} names device {id}, but the module has {} devices",
                    groups_text(groups),
                    count.map_or("an unknown number of".to_string(), |c| c.to_string())
                ));
            }
            if !seen.insert(id) {
                return err(format!(
                    "{name}: {} names device {id} twice",
                    groups_text(groups)
                ));
            }
        }
    }
    Ok(())
}

/// The number of participants in each group.
fn group_size(name: &str, module: &Module, attrs: &CollectiveAttrs) -> Result<i64> {
    group_size_of(name, attrs, device_count(module, attrs))
}

/// [`group_size`] when `count` devices (unknown: `None`) take part in an empty group list.
fn group_size_of(name: &str, attrs: &CollectiveAttrs, count: Option<i64>) -> Result<i64> {
    if let Some(first) = attrs.replica_groups.first() {
        return Ok(first.len() as i64);
    }
    let size = count.ok_or_else(|| {
        super::ShapeError::new(format!(
            "{name}: replica_groups={{}} means all replicas, but the module does not give \
             replica_count, so the result shape is unknown; give replica_groups or \
             replica_count"
        ))
    })?;
    if size < 1 {
        return err(format!(
            "{name}: replica_groups={{}} means all replicas, but the module's replica_count is \
             {size}"
        ));
    }
    Ok(size)
}

fn arrays<'a>(name: &str, operands: &[&'a Shape]) -> Result<Vec<&'a ArrayShape>> {
    if operands.is_empty() {
        return err(format!("{name}: expects at least one operand"));
    }
    operands
        .iter()
        .enumerate()
        .map(|(i, s)| expect_array(name, &format!("operand {i}"), s))
        .collect()
}

fn results(shapes: Vec<ArrayShape>) -> Shape {
    if shapes.len() == 1 {
        Shape::Array(shapes.into_iter().next().unwrap())
    } else {
        Shape::Tuple(shapes.into_iter().map(Shape::Array).collect())
    }
}

/// Checks the reduction computation of all-reduce / reduce-scatter: `(T, T) -> T` for each
/// operand's element type T (one computation is applied to every operand).
fn check_scalar_reducer(
    module: &Module,
    name: &str,
    to_apply: ComputationId,
    operands: &[&Shape],
    arrays: &[&ArrayShape],
) -> Result<()> {
    for (i, a) in arrays.iter().enumerate() {
        let t = [a.element_type];
        check_reducer(
            module,
            name,
            "to_apply",
            to_apply,
            &t,
            &t,
            &format!("operand {i} {}", text(operands[i])),
        )?;
    }
    Ok(())
}

pub(crate) fn all_reduce(
    module: &Module,
    attrs: &CollectiveAttrs,
    to_apply: ComputationId,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "all-reduce";
    let arrays = arrays(name, operands)?;
    check_groups(name, module, attrs, false)?;
    check_scalar_reducer(module, name, to_apply, operands, &arrays)?;
    Ok(results(
        arrays.iter().map(|a| super::util::canonical(a)).collect(),
    ))
}

/// Multiplies (all-gather) or divides (reduce-scatter) `dimension` of each operand.
fn resize_dimension(
    name: &str,
    dimension: i64,
    size: i64,
    gather: bool,
    operands: &[&Shape],
    arrays: &[&ArrayShape],
) -> Result<Vec<ArrayShape>> {
    arrays
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if dimension < 0 || dimension as usize >= a.rank() {
                return err(format!(
                    "{name}: dimensions={{{dimension}}} is out of range for operand {}",
                    text(operands[i])
                ));
            }
            let mut dims: Vec<(i64, bool)> = (0..a.rank()).map(|d| dim(a, d)).collect();
            let slot = &mut dims[dimension as usize];
            if slot.0 != UNKNOWN_DIM {
                if gather {
                    slot.0 *= size;
                } else if slot.0 % size != 0 {
                    return err(format!(
                        "{name}: dimension {dimension} of operand {} has size {}, which does \
                         not divide by the group size {size}",
                        text(operands[i]),
                        slot.0
                    ));
                } else {
                    slot.0 /= size;
                }
            }
            Ok(make_array(a.element_type, &dims))
        })
        .collect()
}

pub(crate) fn all_gather(
    module: &Module,
    attrs: &CollectiveAttrs,
    dimension: i64,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "all-gather";
    let arrays = arrays(name, operands)?;
    check_groups(name, module, attrs, true)?;
    let size = group_size(name, module, attrs)?;
    Ok(results(resize_dimension(
        name, dimension, size, true, operands, &arrays,
    )?))
}

pub(crate) fn reduce_scatter(
    module: &Module,
    attrs: &CollectiveAttrs,
    dimension: i64,
    to_apply: ComputationId,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "reduce-scatter";
    let arrays = arrays(name, operands)?;
    check_groups(name, module, attrs, true)?;
    check_scalar_reducer(module, name, to_apply, operands, &arrays)?;
    let size = group_size(name, module, attrs)?;
    Ok(results(resize_dimension(
        name, dimension, size, false, operands, &arrays,
    )?))
}

pub(crate) fn collective_permute(
    module: &Module,
    pairs: &[(i64, i64)],
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "collective-permute";
    expect_operands(name, operands, 1)?;
    let a = expect_array(name, "the operand", operands[0])?;
    let count = module.replica_count;
    let mut sources = std::collections::HashSet::new();
    let mut targets = std::collections::HashSet::new();
    for &(s, t) in pairs {
        for id in [s, t] {
            if id < 0 || count.is_some_and(|c| id >= c) {
                return err(format!(
                    "{name}: source_target_pairs names replica {id}, outside the module's {} \
                     replicas",
                    count.map_or("unknown number of".to_string(), |c| c.to_string())
                ));
            }
        }
        if !sources.insert(s) || !targets.insert(t) {
            return err(format!(
                "{name}: source_target_pairs {pairs:?} use a source or target twice; each \
                 replica sends at most once and receives at most once (operand {})",
                list(operands)
            ));
        }
    }
    Ok(Shape::Array(super::util::canonical(a)))
}

/// all-to-all: the array form (`dimension`) keeps the operand's shape, its dimension split
/// into one chunk per group member; the tuple form takes one operand per member, all of one
/// shape, and gives a tuple of them.
pub(crate) fn all_to_all(
    module: &Module,
    attrs: &CollectiveAttrs,
    dimension: Option<i64>,
    operands: &[&Shape],
) -> Result<Shape> {
    let name = "all-to-all";
    let arrays = arrays(name, operands)?;
    if attrs.use_global_device_ids {
        return err(format!(
            "{name}: use_global_device_ids is not an attribute of all-to-all (with a \
             channel_id its groups name partitions, without one replicas)"
        ));
    }
    // XLA's modes for all-to-all: a channel makes the ids partitions, else replicas.
    let count = if attrs.channel_id.is_some() {
        module.num_partitions
    } else {
        module.replica_count
    };
    check_groups_of(name, attrs, count, true)?;
    let size = group_size_of(name, attrs, count)?;
    match dimension {
        Some(d) => {
            if arrays.len() != 1 {
                return err(format!(
                    "{name}: dimensions={{{d}}} (the array form) takes one operand, found {} \
                     ({})",
                    arrays.len(),
                    list(operands)
                ));
            }
            // Checks that d splits `size` ways; the chunks are concatenated back along d,
            // so the result has the operand's shape.
            resize_dimension(name, d, size, false, operands, &arrays)?;
            Ok(Shape::Array(super::util::canonical(arrays[0])))
        }
        None => {
            if arrays.len() as i64 != size {
                return err(format!(
                    "{name}: the tuple form takes one operand per group member ({size}), found \
                     {} ({})",
                    arrays.len(),
                    list(operands)
                ));
            }
            let first = super::util::canonical(arrays[0]);
            for (i, a) in arrays.iter().enumerate().skip(1) {
                if super::util::canonical(a) != first {
                    return err(format!(
                        "{name}: operands must have one shape, but operand 0 is {} and \
                         operand {i} is {}",
                        text(operands[0]),
                        text(operands[i])
                    ));
                }
            }
            Ok(Shape::Tuple(
                arrays
                    .iter()
                    .map(|a| Shape::Array(super::util::canonical(a)))
                    .collect(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::ir::ElementType::{self, *};
    use crate::ir::{BinaryOp, Computation, Op};

    fn s(t: ElementType, dims: &[i64]) -> Shape {
        Shape::array(t, dims)
    }

    fn add_region(m: &mut Module, t: ElementType) -> ComputationId {
        let id = m.add_computation(Computation::new("sum"));
        let mut b = Builder::new(m, id);
        let x = b.add_with_shape(Op::Parameter(0), Shape::scalar(t), &[]);
        let y = b.add_with_shape(Op::Parameter(1), Shape::scalar(t), &[]);
        b.add(Op::Binary(BinaryOp::Add), &[x, y]).unwrap();
        id
    }

    fn groups(g: &[&[i64]]) -> CollectiveAttrs {
        CollectiveAttrs {
            replica_groups: g.iter().map(|g| g.to_vec()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn all_reduce_keeps_shapes() {
        let mut m = Module::new("t");
        let sum = add_region(&mut m, F32);
        let x = s(F32, &[3, 2]);
        let y = s(F32, &[]);
        let attrs = groups(&[&[0, 1, 2, 3]]);
        assert_eq!(all_reduce(&m, &attrs, sum, &[&x]).unwrap(), x);
        assert_eq!(
            all_reduce(&m, &attrs, sum, &[&x, &y]).unwrap(),
            Shape::Tuple(vec![x.clone(), y.clone()])
        );
        let e = all_reduce(&m, &attrs, sum, &[&s(S32, &[2])]).unwrap_err();
        assert!(e.message.contains("(s32[], s32[]) -> s32[]"), "{e}");
        let e = all_reduce(&m, &groups(&[&[0, 1], &[1, 2]]), sum, &[&x]).unwrap_err();
        assert!(e.message.contains("names device 1 twice"), "{e}");
        let global = CollectiveAttrs {
            use_global_device_ids: true,
            ..attrs.clone()
        };
        let e = all_reduce(&m, &global, sum, &[&x]).unwrap_err();
        assert!(e.message.contains("needs a channel_id"), "{e}");
        let channel = CollectiveAttrs {
            channel_id: Some(1),
            ..global.clone()
        };
        assert_eq!(all_reduce(&m, &channel, sum, &[&x]).unwrap(), x);
        let no_groups = CollectiveAttrs {
            replica_groups: vec![],
            ..channel
        };
        let e = all_reduce(&m, &no_groups, sum, &[&x]).unwrap_err();
        assert!(e.message.contains("needs explicit replica_groups"), "{e}");
        m.replica_count = Some(2);
        let e = all_reduce(&m, &attrs, sum, &[&x]).unwrap_err();
        assert!(e.message.contains("names device 2"), "{e}");
    }

    #[test]
    fn all_gather_multiplies_by_group_size() {
        let mut m = Module::new("t");
        let x = s(F32, &[2, 3]);
        let r = all_gather(&m, &groups(&[&[0, 1], &[2, 3]]), 0, &[&x]).unwrap();
        assert_eq!(r, s(F32, &[4, 3]));
        let e = all_gather(&m, &groups(&[]), 0, &[&x]).unwrap_err();
        assert!(e.message.contains("replica_count"), "{e}");
        m.replica_count = Some(0);
        assert!(all_gather(&m, &groups(&[]), 0, &[&x]).is_err());
        m.replica_count = Some(4);
        assert_eq!(
            all_gather(&m, &groups(&[]), 1, &[&x]).unwrap(),
            s(F32, &[2, 12])
        );
        assert!(all_gather(&m, &groups(&[&[0, 1, 2], &[3]]), 0, &[&x]).is_err());
        assert!(all_gather(&m, &groups(&[]), 2, &[&x]).is_err());
    }

    #[test]
    fn reduce_scatter_divides() {
        let mut m = Module::new("t");
        let sum = add_region(&mut m, F32);
        let x = s(F32, &[8, 3]);
        let attrs = groups(&[&[0, 1, 2, 3]]);
        assert_eq!(
            reduce_scatter(&m, &attrs, 0, sum, &[&x]).unwrap(),
            s(F32, &[2, 3])
        );
        let e = reduce_scatter(&m, &attrs, 1, sum, &[&x]).unwrap_err();
        assert!(
            e.message
                .contains("size 3, which does not divide by the group size 4"),
            "{e}"
        );
    }

    #[test]
    fn all_to_all_array_and_tuple_forms() {
        let mut m = Module::new("t");
        let x = s(F32, &[4, 3]);
        let attrs = groups(&[&[0, 1], &[2, 3]]);
        assert_eq!(all_to_all(&m, &attrs, Some(0), &[&x]).unwrap(), x);
        let e = all_to_all(&m, &attrs, Some(1), &[&x]).unwrap_err();
        assert!(
            e.message
                .contains("f32[4,3] has size 3, which does not divide by the group size 2"),
            "{e}"
        );
        let e = all_to_all(&m, &attrs, Some(2), &[&x]).unwrap_err();
        assert!(e.message.contains("dimensions={2} is out of range"), "{e}");
        let e = all_to_all(&m, &attrs, Some(0), &[&x, &x]).unwrap_err();
        assert!(e.message.contains("takes one operand, found 2"), "{e}");
        assert_eq!(
            all_to_all(&m, &attrs, None, &[&x, &x]).unwrap(),
            Shape::Tuple(vec![x.clone(), x.clone()])
        );
        let e = all_to_all(&m, &attrs, None, &[&x]).unwrap_err();
        assert!(
            e.message
                .contains("one operand per group member (2), found 1"),
            "{e}"
        );
        let y = s(F32, &[4, 2]);
        let e = all_to_all(&m, &attrs, None, &[&x, &y]).unwrap_err();
        assert!(
            e.message
                .contains("operand 0 is f32[4,3] and operand 1 is f32[4,2]"),
            "{e}"
        );
        let e = all_to_all(&m, &groups(&[&[0, 1, 2], &[3]]), Some(0), &[&x]).unwrap_err();
        assert!(e.message.contains("groups of one size"), "{e}");
        // Without a channel the ids are replicas; with one, partitions.
        m.replica_count = Some(2);
        let e = all_to_all(&m, &attrs, Some(0), &[&x]).unwrap_err();
        assert!(e.message.contains("names device 2"), "{e}");
        let channel = CollectiveAttrs {
            channel_id: Some(1),
            ..attrs.clone()
        };
        m.num_partitions = Some(4);
        assert_eq!(all_to_all(&m, &channel, Some(0), &[&x]).unwrap(), x);
        // No groups: every replica (2 of them) takes part.
        let e = all_to_all(&m, &groups(&[]), Some(0), &[&s(F32, &[5])]).unwrap_err();
        assert!(
            e.message.contains("does not divide by the group size 2"),
            "{e}"
        );
        let global = CollectiveAttrs {
            use_global_device_ids: true,
            ..channel
        };
        let e = all_to_all(&m, &global, Some(0), &[&x]).unwrap_err();
        assert!(e.message.contains("not an attribute of all-to-all"), "{e}");
    }

    #[test]
    fn collective_permute_pairs() {
        let mut m = Module::new("t");
        m.replica_count = Some(2);
        let x = s(F32, &[2]);
        assert_eq!(collective_permute(&m, &[(0, 1), (1, 0)], &[&x]).unwrap(), x);
        assert!(collective_permute(&m, &[(0, 1), (0, 0)], &[&x]).is_err());
        assert!(collective_permute(&m, &[(0, 2)], &[&x]).is_err());
    }
}
