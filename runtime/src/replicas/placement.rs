//! Which replicas of a run this process runs. In one process: all of them. In an MPI job of
//! H hosts (the `mpi` feature, under `mpirun`), host h runs the contiguous block
//! `h*L .. (h+1)*L` of the N replicas (L = N / H), and a run's results are gathered so every
//! host returns all N, as one process would.

use super::rendezvous::Hub;
use std::sync::Arc;
use tessel_compiler::ir::Literal;

/// This process's block of a run's devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The devices of the whole run, on every host.
    pub devices: usize,
    /// The first device this process runs.
    pub first: usize,
    /// How many devices this process runs.
    pub local: usize,
}

impl Placement {
    /// This process's share of a run of `devices`: `None` when it runs them all (no MPI
    /// job, or a job of one host). An error when they do not split evenly over the hosts.
    pub fn of_run(devices: usize) -> Result<Option<Placement>, String> {
        let Some((rank, hosts)) = hosts() else {
            return Ok(None);
        };
        if !devices.is_multiple_of(hosts) {
            return Err(format!(
                "{devices} replicas do not split evenly over the {hosts} hosts of the MPI job \
                 (use a multiple of {hosts})"
            ));
        }
        let local = devices / hosts;
        Ok(Some(Placement {
            devices,
            first: rank * local,
            local,
        }))
    }
}

/// (this host, hosts) of the MPI job this process joined, when it has more than one host.
pub fn hosts() -> Option<(usize, usize)> {
    #[cfg(feature = "mpi")]
    if let Some(w) = super::mpi::world() {
        if w.size() > 1 {
            return Some((w.rank(), w.size()));
        }
    }
    None
}

/// Makes the all-reduce sums over every host of the job's runs use the transport's own
/// all-reduce (`--fast-allreduce`: MPI adds the hosts' partial sums in an order of its own,
/// faster but not bitwise reproducible) when `on`, or keep the default (gather, then add in
/// replica-id order). In a job of several hosts every host must call it at the same point
/// and with the same `on` (else an error on every host); elsewhere it does nothing.
pub fn set_fast_allreduce(on: bool) -> Result<(), String> {
    #[cfg(feature = "mpi")]
    if let Some(w) = super::mpi::world() {
        if w.size() > 1 {
            return w.set_fast_allreduce(on);
        }
    }
    let _ = on;
    Ok(())
}

/// The hub of a run of `local` devices here: the whole run, or this process's block of it.
/// Returns the hub, the first local device and the run's device count.
pub(crate) fn hub_for(
    placement: Option<Placement>,
    local: usize,
) -> Result<(Arc<Hub>, usize, usize), String> {
    match placement {
        None => Ok((Arc::new(Hub::new(local)), 0, local)),
        Some(p) if p.local != local => Err(format!(
            "this host runs replicas {}..{} but was given arguments for {local}",
            p.first,
            p.first + p.local
        )),
        Some(p) => Ok((spanning_hub(p)?, p.first, p.devices)),
    }
}

#[cfg(feature = "mpi")]
fn spanning_hub(p: Placement) -> Result<Arc<Hub>, String> {
    match super::mpi::world() {
        Some(w) => Ok(w.start_run(p.devices, p.first..p.first + p.local)),
        None => Err(no_world()),
    }
}

#[cfg(not(feature = "mpi"))]
fn spanning_hub(_: Placement) -> Result<Arc<Hub>, String> {
    Err(no_world())
}

fn no_world() -> String {
    "a run split over several hosts needs an MPI job (build with --features mpi and start \
     it with mpirun)"
        .into()
}

/// Every device's value of a run split over hosts, in device order, on every host; `local`
/// are this host's devices' values.
pub(crate) fn gather(p: Placement, local: Vec<Literal>) -> Result<Vec<Literal>, String> {
    use tessel_compiler::interpreter::CollectiveSite;
    use tessel_compiler::ir::{ComputationId, InstrId};
    let (hub, first, devices) = hub_for(Some(p), local.len())?;
    // A site no module has: the gather is a rendezvous of its own run.
    let site = CollectiveSite {
        computation: ComputationId(u32::MAX),
        instruction: InstrId::new(0),
    };
    let group: Vec<usize> = (0..devices).collect();
    let mine = local
        .into_iter()
        .enumerate()
        .map(|(i, v)| (first + i, vec![v]))
        .collect();
    let all = hub
        .meet((site, 1, 0), &group, 1, mine)
        .map_err(|e| e.to_string())?;
    Ok(all
        .into_iter()
        .map(|d| d.first().cloned().unwrap_or(Literal::Token))
        .collect())
}
