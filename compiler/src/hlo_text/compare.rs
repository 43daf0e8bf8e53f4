//! Structural comparison of modules, for round-trip checks: what a reader of the text can see
//! (names, shapes, ops, operands, roots, metadata, attributes, debug tables) must agree;
//! computation ids and instruction ids may differ.

use super::literal_text::literal_to_text;
use crate::ir::{ComputationId, InstrId, Module, Op};
use hashbrown::HashMap;

/// `None` when `a` and `b` are the same module up to ids; otherwise the first difference.
pub fn module_difference(a: &Module, b: &Module) -> Option<String> {
    macro_rules! same {
        ($field:ident) => {
            if a.$field != b.$field {
                return Some(format!(
                    "module {}: {:?} vs {:?}",
                    stringify!($field),
                    a.$field,
                    b.$field
                ));
            }
        };
    }
    same!(name);
    same!(replica_count);
    same!(num_partitions);
    same!(frontend_attributes);
    same!(extra_attrs);
    same!(debug_info);
    if a.computations.len() != b.computations.len() {
        return Some(format!(
            "{} computations vs {}",
            a.computations.len(),
            b.computations.len()
        ));
    }
    if a.entry().name != b.entry().name {
        return Some(format!(
            "entry `{}` vs `{}`",
            a.entry().name,
            b.entry().name
        ));
    }
    // a's computation ids in terms of b's.
    let mut to_b: HashMap<ComputationId, ComputationId> = HashMap::new();
    for cid in a.computation_ids() {
        let name = &a.computation(cid).name;
        match b.find_computation(name) {
            Some(bid) => {
                to_b.insert(cid, bid);
            }
            None => return Some(format!("computation `{name}` is missing")),
        }
    }
    for cid in a.computation_ids() {
        if let Some(d) = computation_difference(a, cid, b, to_b[&cid], &to_b) {
            return Some(format!("in computation `{}`: {d}", a.computation(cid).name));
        }
    }
    None
}

fn computation_difference(
    a: &Module,
    acid: ComputationId,
    b: &Module,
    bcid: ComputationId,
    to_b: &HashMap<ComputationId, ComputationId>,
) -> Option<String> {
    let (ac, bc) = (a.computation(acid), b.computation(bcid));
    let (ao, bo) = (ac.post_order(), bc.post_order());
    if ao.len() != bo.len() {
        return Some(format!("{} instructions vs {}", ao.len(), bo.len()));
    }
    let index = |order: &[InstrId]| -> HashMap<InstrId, usize> {
        order.iter().enumerate().map(|(i, &id)| (id, i)).collect()
    };
    let (ai, bi) = (index(&ao), index(&bo));
    if ac.has_root() != bc.has_root() || (ac.has_root() && ai.get(&ac.root()) != bi.get(&bc.root()))
    {
        return Some("different roots".to_string());
    }
    for (&x, &y) in ao.iter().zip(&bo) {
        let (p, q) = (ac.get(x), bc.get(y));
        let what = || format!("instruction `{}`", p.name);
        if p.name != q.name {
            return Some(format!("{}: named `{}` vs `{}`", what(), p.name, q.name));
        }
        if p.shape != q.shape {
            return Some(format!("{}: shape {} vs {}", what(), p.shape, q.shape));
        }
        let same_op = match (&p.op, &q.op) {
            (Op::Constant(l), Op::Constant(m)) => {
                l.shape() == m.shape() && literal_to_text(l) == literal_to_text(m)
            }
            (pop, qop) => {
                let mut mapped = pop.clone();
                mapped.map_called_computations(|c| to_b[&c]);
                &mapped == qop
            }
        };
        if !same_op {
            return Some(format!("{}: op {:?} vs {:?}", what(), p.op, q.op));
        }
        let pos_a: Vec<usize> = p.operands().iter().map(|o| ai[o]).collect();
        let pos_b: Vec<usize> = q.operands().iter().map(|o| bi[o]).collect();
        if pos_a != pos_b {
            return Some(format!("{}: different operands", what()));
        }
        if p.metadata != q.metadata {
            return Some(format!(
                "{}: metadata {:?} vs {:?}",
                what(),
                p.metadata,
                q.metadata
            ));
        }
        if p.extra_attrs != q.extra_attrs {
            return Some(format!(
                "{}: attributes {:?} vs {:?}",
                what(),
                p.extra_attrs,
                q.extra_attrs
            ));
        }
    }
    None
}
