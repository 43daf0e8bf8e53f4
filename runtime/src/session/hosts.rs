//! A session run on several hosts (an MPI job): each host runs its block of the devices
//! ([`Placement`]) and the results are gathered, so every host returns what one process
//! running all devices would. Without a job of several hosts, everything passes through.

use super::error::SessionError;
use super::loop_program::LoopOutputs;
use crate::replicas::placement::gather;
use crate::replicas::Placement;
use tessel_compiler::ir::{Array, Literal};

/// This host's block of a run of `items.len()` devices, and its devices' items. A device
/// that runs on this host only ([`super::Device::on_this_host`]) keeps them all.
pub(crate) fn local_share<T>(
    items: Vec<T>,
    this_host_only: bool,
) -> Result<(Option<Placement>, Vec<T>), SessionError> {
    if this_host_only {
        return Ok((None, items));
    }
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
        // This host's devices keep their share.
        on_device: local.on_device,
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

/// Host 0's `value`, on every host of an MPI job of several hosts (the other hosts' values
/// are dropped: they pass what is cheapest to send, an empty tuple); `value` itself without
/// such a job. It is a run of the job: every host calls it at the same point of its program.
pub fn from_chief(value: Literal) -> Result<Literal, SessionError> {
    let Some((rank, hosts)) = crate::replicas::placement::hosts() else {
        return Ok(value);
    };
    let placement = Placement {
        devices: hosts,
        first: rank,
        local: 1,
    };
    gather(placement, vec![value])
        .map_err(SessionError::run)?
        .into_iter()
        .next()
        .ok_or_else(|| SessionError::run("the chief sent no value"))
}

/// Every host's `value`, in host order, on every host of an MPI job of several hosts; `[value]`
/// without such a job. It is a run of the job: every host calls it at the same point of its
/// program.
pub fn from_every_host(value: Literal) -> Result<Vec<Literal>, SessionError> {
    let Some((rank, hosts)) = crate::replicas::placement::hosts() else {
        return Ok(vec![value]);
    };
    let placement = Placement {
        devices: hosts,
        first: rank,
        local: 1,
    };
    gather(placement, vec![value]).map_err(SessionError::run)
}
