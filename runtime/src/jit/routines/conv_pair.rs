//! Two independent convolutions run side by side, one per core, instead of one after the
//! other on both: a training step's backward pass has such a pair in each conv layer with a
//! Winograd or GEMM-sized input gradient (the data gradient and the filter gradient both read
//! only the output gradient), and each routine loses about a tenth of its time to the
//! split between two workers that running it alone on one core does not pay
//! (`docs/jit.md`, "Two convolutions side by side").
//!
//! The rule (`conv_pairs`), over the order the program runs the computation in:
//! - a convolution `B` pairs with the latest convolution `A` run before it and not yet
//!   paired for which the rest holds; every operand of `B` is computed before `A`, so `B`
//!   can run at `A`'s position, and nothing run in between reads it (it comes later in a
//!   dependency order). `B`'s value is then live from `A`'s position on, which costs arena
//!   space the further apart they are;
//! - neither has an epilogue (a folded bias add or max-pool: its value or buffers would
//!   have to move with it);
//! - both run on a specialized routine of the same kind, both direct or both Winograd, whose
//!   bits do not depend on its thread count; the patch GEMM's can (the `gemm` crate may split
//!   a long sum between threads), and a pair must not change the bits;
//! - both have the same direct multiply-add count, within [`BALANCE`], so that neither core
//!   waits long for the other (the count compares work only within one kind of routine);
//! - only with two threads (`JitOptions::gemm_threads`) and `JitOptions::pair_convolutions`.
//!
//! Both are then planned for one thread each. `B`'s value and scratch are written at `A`'s
//! position (`JitBufferNeeds::written_at`), so the buffer assignment keeps them clear of
//! everything `A` reads or uses and everything live in between; the program pairs only where
//! the assignment did (`BufferAssignment::written_early`). Each routine's bits do not depend
//! on its thread count, so the pair gives the same bits as the two run one after the other.

use super::bias_match::lone_bias_add;
use super::conv_select::{plan_convolution, ConvPrecision};
use super::pool_fold::pool_source;
use crate::jit::buffer::Addr;
use crate::jit::fused_kernels::fusion_plan;
use crate::jit::host::{take_last_error, Status};
use crate::jit::JitOptions;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessel_compiler::ir::{Computation, ComputationId, InstrId, Module, Op};
use tessel_kernels::parallel::{for_each_worker, Shared};

/// The most the two convolutions' multiply-add counts may differ by, as a ratio. With `s` a
/// routine's speed-up from one thread to two, and one-thread times `w` and `r * w`, the pair
/// takes `r * w` and one after the other `(1 + r) * w / s`: the pair wins only while
/// `r < 1 / (s - 1)`, 1.25 at s = 1.8, and about 1 for the Winograd routines in a quiet
/// minute (s = 1.95-2.0; the pair gains most when the host slows the second core). So the two
/// must do about the same work.
pub(crate) const BALANCE: f64 = 1.1;

/// The pairs `(A, B)` of convolutions of `comp` that run side by side (see the module doc):
/// `B` runs at `A`'s position.
fn conv_pairs(m: &Module, comp: &Computation, options: &JitOptions) -> Pairs {
    if !options.pair_convolutions || options.gemm_threads < 2 {
        return Vec::new();
    }
    if !comp
        .instructions()
        .any(|(_, i)| matches!(i.op, Op::Convolution(_)))
    {
        return Vec::new();
    }
    let fused = fusion_plan::plan(comp);
    let order: Vec<InstrId> = comp
        .post_order()
        .into_iter()
        .filter(|id| !fused.contains(id))
        .collect();
    let position: HashMap<InstrId, usize> =
        order.iter().enumerate().map(|(p, &id)| (id, p)).collect();
    let mut pairs = Vec::new();
    // The convolutions run so far that may still take a partner, in order, with their kind.
    let mut unpaired: Vec<(InstrId, Kind)> = Vec::new();
    for &id in &order {
        if !matches!(comp.get(id).op, Op::Convolution(_))
            || has_epilogue(m, comp, id)
            || is_three_by_three(comp, id)
        {
            continue;
        }
        let Some(kind) = routine_kind(comp, id, options) else {
            continue;
        };
        let operands_before = |a: InstrId| {
            comp.get(id)
                .operands()
                .iter()
                .all(|o| position.get(o).is_some_and(|&p| p < position[&a]))
        };
        // The latest partner keeps this one's buffers live the shortest.
        match unpaired
            .iter()
            .rposition(|&(a, k)| k == kind && operands_before(a) && balanced(comp, a, id))
        {
            Some(k) => pairs.push((unpaired.remove(k).0, id)),
            None => unpaired.push((id, kind)),
        }
    }
    pairs
}

/// The pairs of each computation of one module, worked out once: the rule plans every
/// convolution, and the buffer assignment and the program ask about each convolution several
/// times. Whoever holds one uses it for one module at a time ([`PairCache::clear`] between).
#[derive(Debug, Default)]
pub(crate) struct PairCache(Mutex<HashMap<ComputationId, Arc<Pairs>>>);

/// The pairs `(A, B)` of one computation: `B` runs at `A`'s position.
type Pairs = Vec<(InstrId, InstrId)>;

impl PairCache {
    /// Forgets every answer (another module is next).
    pub(crate) fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn pairs(&self, m: &Module, comp: ComputationId, options: &JitOptions) -> Arc<Pairs> {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            cache
                .entry(comp)
                .or_insert_with(|| Arc::new(conv_pairs(m, m.computation(comp), options))),
        )
    }

    /// The pair convolution `id` of `comp` is in, if any.
    pub(crate) fn pair_of(
        &self,
        m: &Module,
        comp: ComputationId,
        id: InstrId,
        options: &JitOptions,
    ) -> Option<(InstrId, InstrId)> {
        if !matches!(m.computation(comp).get(id).op, Op::Convolution(_)) {
            return None;
        }
        let pairs = self.pairs(m, comp, options);
        pairs.iter().copied().find(|&(a, b)| a == id || b == id)
    }

    /// The convolution that convolution `id` runs beside (at its position), if it is the
    /// second of a pair.
    pub(crate) fn first_of(
        &self,
        m: &Module,
        comp: ComputationId,
        id: InstrId,
        options: &JitOptions,
    ) -> Option<InstrId> {
        let (a, b) = self.pair_of(m, comp, id, options)?;
        (b == id).then_some(a)
    }
}

/// Whether a routine may compute something after convolution `conv`: a bias add that alone
/// reads it, or a max-pool of it (directly or through that add).
fn has_epilogue(m: &Module, comp: &Computation, conv: InstrId) -> bool {
    let z = lone_bias_add(m, comp, conv).map_or(conv, |(fusion, _)| fusion);
    z != conv
        || comp
            .users(conv)
            .into_iter()
            .any(|u| pool_source(m, comp, u).is_some())
}

/// The kind of routine convolution `id` runs on, when its bits do not depend on its thread
/// count: `Direct` or `Winograd` (planned here with placeholder addresses to ask); `None`
/// for the patch GEMM.
fn routine_kind(comp: &Computation, id: InstrId, options: &JitOptions) -> Option<Kind> {
    let instr = comp.get(id);
    let Op::Convolution(conv) = &instr.op else {
        return None;
    };
    let shape = |k: usize| comp.get(instr.operands()[k]).shape.as_array();
    let (input, kernel, output) = (shape(0)?, shape(1)?, instr.shape.as_array()?);
    let placeholder = Addr::Arena(0);
    plan_convolution(
        &instr.name,
        conv,
        ConvPrecision::of(&instr.extra_attrs),
        (placeholder, input),
        (placeholder, kernel),
        (placeholder, output),
        &options.one_thread(),
        &mut |_| placeholder,
    )
    .ok()
    .and_then(|routine| match routine.algorithm() {
        "direct" | "direct-weight-grad" => Some(Kind::Direct),
        "winograd" | "winograd-filter" => Some(Kind::Winograd),
        _ => None,
    })
}

/// Whether `conv` is a 3x3 convolution or the filter gradient of one (its output is 3x3).
/// Their routines are not paired: the Winograd F(4x4, 3x3) routines scale to two threads
/// (1.9-2.0x), so a pair, each on one core, gains nothing by the rule's arithmetic (see
/// [`BALANCE`]), and measured it lost. On a Zen 5 (`cpu family 26`, `model 2`) the ResNet-20
/// step's pairs took 2.56, 1.76 and 1.26 ms per stage against 2.06, 1.44 and 1.14 ms for
/// their two routines one after the other on both cores; the step took 75 ms with pairs and
/// 69-71 without, and with another process competing for the cores 141-147 against
/// 123-127 ms. The Fashion-MNIST CNN's one 3x3 pair was within the noise either way. The
/// MNIST CNN's 5x5 pairs still gain (its step is about 4% faster with them).
fn is_three_by_three(comp: &Computation, conv: InstrId) -> bool {
    let instr = comp.get(conv);
    let Op::Convolution(c) = &instr.op else {
        return false;
    };
    let filter = c.window.dims.len() == 2 && c.window.dims.iter().all(|d| d.size == 3);
    let gradient = instr.shape.as_array().is_some_and(|out| {
        c.dims.output_spatial.len() == 2
            && c.dims
                .output_spatial
                .iter()
                .all(|&d| out.dims.get(d as usize) == Some(&3))
    });
    filter || gradient
}

/// A family of routines with about the same speed per direct multiply-add (Winograd does
/// far fewer products than the direct loops for the same count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Direct,
    Winograd,
}

/// Whether the two convolutions' direct multiply-add counts are within [`BALANCE`].
fn balanced(comp: &Computation, a: InstrId, b: InstrId) -> bool {
    match (multiply_adds(comp, a), multiply_adds(comp, b)) {
        (Some(x), Some(y)) if x > 0.0 && y > 0.0 => x.max(y) / x.min(y) <= BALANCE,
        _ => false,
    }
}

/// Output elements x window positions x input features per group: the convolution's
/// multiply-adds as a direct sum.
fn multiply_adds(comp: &Computation, conv: InstrId) -> Option<f64> {
    let instr = comp.get(conv);
    let Op::Convolution(c) = &instr.op else {
        return None;
    };
    let out = instr.shape.as_array()?.element_count() as f64;
    let kernel = comp.get(*instr.operands().get(1)?).shape.as_array()?;
    let window: f64 = c.window.dims.iter().map(|d| d.size as f64).product();
    let features = *kernel.dims.get(c.dims.kernel_input_feature as usize)? as f64;
    Some(out * window * features)
}

/// Two planned convolution routines run side by side.
pub(crate) struct ConvPairPlan {
    pub name: String,
    /// Each routine's address (`unsafe extern "C" fn(plan, arena) -> Status`) and plan.
    pub routines: [(usize, Box<dyn std::any::Any + Send + Sync>); 2],
}

/// Called by generated code: runs the two convolutions of `plan`, one on each worker, and
/// returns when both are done; the first failure's message becomes this call's.
///
/// # Safety
/// `plan` must point to a live [`ConvPairPlan`] whose routines are given their own plans, and
/// `arena` must be the running program's arena.
pub(crate) unsafe extern "C" fn conv_pair_routine(
    plan: *const ConvPairPlan,
    arena: *mut u8,
) -> Status {
    let plan = &*plan;
    let arena = Shared(arena);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    for_each_worker(2, |w| {
        let (routine, p) = &plan.routines[w];
        // SAFETY: the routine was chosen for this plan by `plan_convolution`.
        let f = unsafe {
            std::mem::transmute::<usize, unsafe extern "C" fn(*const (), *mut u8) -> Status>(
                *routine,
            )
        };
        let p = &**p as *const (dyn std::any::Any + Send + Sync) as *const ();
        if unsafe { f(p, arena.get()) } != 0 {
            let msg = take_last_error().unwrap_or_else(|| "failed".into());
            failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(msg);
        }
    });
    match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        None => 0,
        Some(msg) => {
            crate::jit::host::set_error(format!("{}: {msg}", plan.name));
            1
        }
    }
}
