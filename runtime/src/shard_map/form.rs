//! Finding the shard_map form in a module's entry (which parameters feed the body with which
//! sharding, which body outputs form the root) and the rewrite to the per-replica module.

use super::mesh::{sharding_attr, Sharding};
use super::{fail, ShardMapError};
use tessel_compiler::ir::{ComputationId, InstrId, Module, Op};

pub(crate) const GLOBAL_TO_LOCAL: &str = "xla.sdy.GlobalToLocalShape";
pub(crate) const LOCAL_TO_GLOBAL: &str = "xla.sdy.LocalToGlobalShape";

/// The pieces of the entry: parameters feeding GlobalToLocalShape, the body call, and how the
/// root's leaves come out of LocalToGlobalShape.
pub(super) struct Form {
    /// For each body argument: the entry parameter it comes from and its sharding.
    pub(super) body_args: Vec<(usize, Sharding)>,
    pub(super) body: ComputationId,
    /// For each root leaf: the body output it is and its sharding.
    pub(super) outputs: Vec<(usize, Sharding)>,
}

pub(super) fn find_form(module: &Module) -> Result<Form, ShardMapError> {
    let e = module.entry();
    let find = |target: &str| -> Result<InstrId, ShardMapError> {
        let found: Vec<InstrId> = e
            .ids()
            .iter()
            .copied()
            .filter(|&id| matches!(&e.get(id).op, Op::CustomCall { target: t, .. } if t == target))
            .collect();
        match found[..] {
            [one] => Ok(one),
            _ => fail(format!(
                "expected one {target} custom-call in the entry, found {}",
                found.len()
            )),
        }
    };
    let g2l = find(GLOBAL_TO_LOCAL)?;
    let l2g = find(LOCAL_TO_GLOBAL)?;
    let in_shardings = sharding_attr(module, g2l, "xla.sdy.in_shardings")?;
    let out_shardings = sharding_attr(module, l2g, "xla.sdy.out_shardings")?;
    let g2l_params: Vec<usize> = e
        .get(g2l)
        .operands()
        .iter()
        .map(|&o| match e.get(o).op {
            Op::Parameter(n) => Ok(n as usize),
            _ => fail(format!(
                "{GLOBAL_TO_LOCAL} operand {} is not an entry parameter",
                e.get(o).name
            )),
        })
        .collect::<Result<_, _>>()?;
    if in_shardings.len() != g2l_params.len() {
        return fail(format!(
            "{GLOBAL_TO_LOCAL} has {} operands but {} in_shardings",
            g2l_params.len(),
            in_shardings.len()
        ));
    }
    // Which output of `producer` an instruction is: a get-tuple-element of it, or itself.
    let output_of = |id: InstrId, producer: InstrId| -> Option<usize> {
        if id == producer {
            return Some(0);
        }
        match e.get(id).op {
            Op::GetTupleElement { index } if e.get(id).operands()[0] == producer => {
                Some(index as usize)
            }
            _ => None,
        }
    };
    let calls: Vec<InstrId> = e
        .ids()
        .iter()
        .copied()
        .filter(|&id| matches!(e.get(id).op, Op::Call { .. }))
        .collect();
    let [call] = calls[..] else {
        return fail(format!(
            "expected one call of the manual computation body, found {}",
            calls.len()
        ));
    };
    let Op::Call { to_apply: body } = e.get(call).op else {
        unreachable!()
    };
    let body_args = e
        .get(call)
        .operands()
        .iter()
        .map(|&o| {
            let i = output_of(o, g2l).ok_or_else(|| ShardMapError {
                message: format!(
                    "body argument {} does not come from {GLOBAL_TO_LOCAL}",
                    e.get(o).name
                ),
            })?;
            Ok((g2l_params[i], in_shardings[i].clone()))
        })
        .collect::<Result<Vec<_>, ShardMapError>>()?;
    let l2g_sources: Vec<usize> = e
        .get(l2g)
        .operands()
        .iter()
        .map(|&o| {
            output_of(o, call).ok_or_else(|| ShardMapError {
                message: format!(
                    "{LOCAL_TO_GLOBAL} operand {} is not a body output",
                    e.get(o).name
                ),
            })
        })
        .collect::<Result<_, _>>()?;
    if out_shardings.len() != l2g_sources.len() {
        return fail(format!(
            "{LOCAL_TO_GLOBAL} has {} operands but {} out_shardings",
            l2g_sources.len(),
            out_shardings.len()
        ));
    }
    let root = e.root();
    let leaves: Vec<InstrId> = match e.get(root).op {
        Op::Tuple => e.get(root).operands().to_vec(),
        _ => vec![root],
    };
    let outputs = leaves
        .iter()
        .map(|&l| {
            let i = output_of(l, l2g).ok_or_else(|| ShardMapError {
                message: format!(
                    "root element {} does not come from {LOCAL_TO_GLOBAL}",
                    e.get(l).name
                ),
            })?;
            Ok((l2g_sources[i], out_shardings[i].clone()))
        })
        .collect::<Result<Vec<_>, ShardMapError>>()?;
    for &id in e.ids() {
        let op = &e.get(id).op;
        if !matches!(
            op,
            Op::Parameter(_)
                | Op::CustomCall { .. }
                | Op::GetTupleElement { .. }
                | Op::Call { .. }
                | Op::Tuple
        ) {
            return fail(format!(
                "the entry computes {} outside the manual computation; only the plain shard_map form is supported",
                e.get(id).name
            ));
        }
    }
    Ok(Form {
        body_args,
        body,
        outputs,
    })
}

/// The per-replica program of a shard_map module: the module with the manual computation's
/// body as its entry (what every replica runs; `tessel compile` compiles this).
pub fn per_replica_module(module: &Module) -> Result<Module, ShardMapError> {
    let form = find_form(module)?;
    let mut body = module.clone();
    body.entry = form.body;
    Ok(body)
}
