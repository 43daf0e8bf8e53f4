//! A session run on several hosts (an MPI job): each host runs its block of the devices
//! ([`Placement`]) and the results are gathered, so every host returns what one process
//! running all devices would. Without a job of several hosts, everything passes through.

use super::error::SessionError;
use super::loop_program::LoopOutputs;
use crate::replicas::placement::gather;
use crate::replicas::Placement;
use tessel_compiler::ir::{Array, Literal};

/// This host's block of a run of `items.len()` devices, and its devices' items.
pub(crate) fn local_share<T>(items: Vec<T>) -> Result<(Option<Placement>, Vec<T>), SessionError> {
    match Placement::of_run(items.len()).map_err(SessionError::run)? {
        None => Ok((None, items)),
        Some(p) => Ok((
            Some(p),
            items.into_iter().skip(p.first).take(p.local).collect(),
        )),
    }
}

/// Every device's result, in device order, from this host's `local` ones.
pub(crate) fn gather_results(
    placement: Option<Placement>,
    local: Vec<Literal>,
) -> Result<Vec<Literal>, SessionError> {
    match placement {
        None => Ok(local),
        Some(p) => gather(p, local).map_err(SessionError::run),
    }
}

/// Every device's loop outputs from this host's.
pub(crate) fn gather_loop_outputs(
    placement: Option<Placement>,
    local: LoopOutputs,
) -> Result<LoopOutputs, SessionError> {
    let Some(p) = placement else {
        return Ok(local);
    };
    let tuple = |v: Vec<Array>| Literal::Tuple(v.into_iter().map(Literal::Array).collect());
    let values = local
        .carried
        .into_iter()
        .zip(local.per_iteration)
        .map(|(c, i)| Literal::Tuple(vec![tuple(c), tuple(i)]))
        .collect();
    let arrays = |l: &Literal| -> Vec<Array> { l.leaves().into_iter().cloned().collect() };
    let mut out = LoopOutputs {
        carried: Vec::with_capacity(p.devices),
        per_iteration: Vec::with_capacity(p.devices),
    };
    for v in gather(p, values).map_err(SessionError::run)? {
        let parts = v.as_tuple().unwrap_or_default();
        let (Some(c), Some(i)) = (parts.first(), parts.get(1)) else {
            return Err(SessionError::run(
                "a host sent loop outputs of another form",
            ));
        };
        out.carried.push(arrays(c));
        out.per_iteration.push(arrays(i));
    }
    Ok(out)
}
