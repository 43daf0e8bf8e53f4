//! What a direct or Winograd forward convolution computes as it stores its output, besides
//! the sums: a bias added to each output (`bias_match.rs`) and a max-pool of each block it has
//! written (`pool_fold.rs`). Both routines' plans hold one.

use crate::jit::buffer::Addr;
use crate::jit::host::resolve;
use tessel_kernels::pooling::PoolEpilogue;

/// Where a folded max-pool writes: its output, and its window choices when its gradient reads
/// them (`pool_choices.rs`); `discard_output` when nothing else reads the convolution's
/// output, which the routine then need not store (`PoolEpilogue::discard_output`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolTargets {
    pub output: Addr,
    pub choices: Option<Addr>,
    pub discard_output: bool,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ConvEpilogue {
    /// The bias the stores add (`conv_select::ConvRoutine::take_bias`).
    pub bias: Option<Addr>,
    /// The max-pool and where it writes (`conv_select::ConvRoutine::take_pool`).
    pool: Option<(PoolEpilogue, PoolTargets)>,
}

impl ConvEpilogue {
    /// Takes `pool` (writing to `to`), and `bias` when given, if the routine `accepts` the
    /// pool and, for a bias, has none yet; else takes nothing.
    pub(crate) fn take_pool(
        &mut self,
        accepts: bool,
        pool: PoolEpilogue,
        to: PoolTargets,
        bias: Option<Addr>,
    ) -> bool {
        let taken = accepts && (bias.is_none() || self.bias.is_none());
        if taken {
            self.pool = Some((pool, to));
            self.bias = bias.or(self.bias);
        }
        taken
    }

    /// The bias and the pool with their buffers in `arena`.
    ///
    /// # Safety
    /// `arena` must be the program's arena.
    pub(crate) unsafe fn resolve(
        &self,
        arena: *mut u8,
    ) -> (Option<*const f32>, Option<PoolEpilogue>) {
        let bias = self.bias.map(|b| resolve(b, arena) as *const f32);
        let pool = self.pool.map(|(p, to)| PoolEpilogue {
            output: resolve(to.output, arena) as *mut f32,
            choices: to
                .choices
                .map_or(std::ptr::null_mut(), |c| resolve(c, arena)),
            discard_output: to.discard_output,
            ..p
        });
        (bias, pool)
    }
}
