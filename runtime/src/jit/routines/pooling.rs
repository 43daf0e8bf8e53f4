//! Plans for the kernels crate's pooling routines (`tessel_kernels::pooling`): a fusion that
//! `pool_match` recognizes (a max-pool forward, or the max-pool gradient with its ReLU gate
//! and bias sum) is one routine call over its buffers instead of a generated kernel.
//!
//! The bias sum is cut where the generated kernels would cut it (`reduce::reduce_split`, the
//! scratch the buffer assignment planned for it holds the second part), so the result is the
//! same bits on one and two threads.

use super::pool_match::PoolMatch;
use crate::jit::buffer::Addr;
use crate::jit::host::{guarded, resolve, Status};
use tessel_kernels::pooling::{BiasSum, MaxPool, MaxPoolGrad};

/// What a gradient chooses each window's position from.
#[derive(Clone, Copy, Debug)]
enum Picks {
    Values(Addr),
    Choices(Addr),
}

/// A recognized pooling fusion with its buffers.
#[derive(Clone, Debug)]
pub(crate) struct PoolPlan {
    name: String,
    routine: PoolRoutine,
}

#[derive(Clone, Debug)]
enum PoolRoutine {
    Forward {
        pool: MaxPool,
        input: Addr,
        output: Addr,
        /// Where the window choices go, when a gradient reads them (`pool_choices.rs`).
        choices: Option<Addr>,
    },
    Backward {
        grad: MaxPoolGrad,
        /// The pre-activation, or the window choices its forward pool recorded.
        picks: Picks,
        g: Addr,
        dz: Addr,
        /// The bias sum's output, and the scratch for its second part with the cut.
        bias: Option<(Addr, Option<(Addr, usize)>)>,
    },
}

impl PoolPlan {
    /// The plan for `m` over the fusion's parameter buffers `params` and outputs (`outputs[k]`
    /// is the fusion's output `k`, one entry when it is not a tuple); `partial` is the planned
    /// scratch of the bias sum's second part with the cut, when the sum is split; `choices`
    /// the window choices' buffer (`pool_choices.rs`) a forward pool writes or a gradient
    /// reads instead of the pre-activation. `None` when the routine declines the geometry.
    pub(crate) fn new(
        name: &str,
        m: &PoolMatch,
        params: &[Addr],
        outputs: &[Addr],
        partial: Option<(Addr, usize)>,
        choices: Option<Addr>,
        threads: usize,
    ) -> Option<PoolPlan> {
        let routine = match *m {
            PoolMatch::Forward {
                input,
                geometry,
                relu,
                bias: None,
            } => {
                let pool = MaxPool::new(geometry, relu, threads).ok()?;
                if choices.is_some() && !pool.can_choose() {
                    return None;
                }
                PoolRoutine::Forward {
                    pool,
                    input: *params.get(input as usize)?,
                    output: *outputs.first()?,
                    choices,
                }
            }
            // The inference form's bias is computed only in a convolution's epilogue.
            PoolMatch::Forward { bias: Some(_), .. } => return None,
            PoolMatch::Backward {
                z,
                grad,
                geometry,
                relu,
                gate,
                outputs: outs,
            } => {
                let (dz, bias) = match outs {
                    Some((d, b, _)) => (*outputs.get(d)?, Some((*outputs.get(b)?, partial))),
                    None => (*outputs.first()?, None),
                };
                PoolRoutine::Backward {
                    grad: MaxPoolGrad::new(geometry, relu, gate, threads).ok()?,
                    picks: match choices {
                        Some(c) => Picks::Choices(c),
                        None => Picks::Values(*params.get(z as usize)?),
                    },
                    g: *params.get(grad as usize)?,
                    dz,
                    bias,
                }
            }
        };
        Some(PoolPlan {
            name: name.to_string(),
            routine,
        })
    }

    /// # Safety
    /// `arena` must be the program's arena.
    unsafe fn run(&self, arena: *mut u8) {
        let f = |a: Addr| resolve(a, arena) as *mut f32;
        match &self.routine {
            PoolRoutine::Forward {
                pool,
                input,
                output,
                choices,
            } => {
                let choices = choices.map_or(std::ptr::null_mut(), |c| resolve(c, arena));
                pool.run_with_choices(f(*input), f(*output), choices)
            }
            PoolRoutine::Backward {
                grad,
                picks,
                g,
                dz,
                bias,
            } => {
                let sum = bias.map(|(b, partial)| BiasSum {
                    bias: f(b),
                    partial: partial.map(|(p, cut)| (f(p), cut)),
                });
                match *picks {
                    Picks::Values(z) => grad.run(f(z), f(*g), f(*dz), sum),
                    Picks::Choices(c) => {
                        grad.run_from_choices(resolve(c, arena), f(*g), f(*dz), sum)
                    }
                }
            }
        }
    }
}

/// Called by generated code: `plan` is a `*const PoolPlan` the executable keeps alive.
///
/// # Safety
/// `plan` must point to a live `PoolPlan` and `arena` be the program's arena.
pub(crate) unsafe extern "C" fn pool_routine(plan: *const PoolPlan, arena: *mut u8) -> Status {
    let plan = unsafe { &*plan };
    guarded(&plan.name, || {
        unsafe { plan.run(arena) };
        Ok(())
    })
}
