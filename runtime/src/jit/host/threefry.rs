//! Threefry-2x32's rounds in compiled code: the custom call the compiler's `threefry-rounds`
//! pass makes of a traced Threefry chain, run by `tessel_kernels::threefry` (16 lanes with
//! AVX-512, 8 with AVX2) on the program's threads.

use crate::jit::buffer::{Buffer, Loc};
use crate::jit::host::routine_abi::{guarded, resolve, Status};
use tessel_compiler::ir::ElementType;
use tessel_kernels::threefry::{threefry_rounds, Words};

/// The buffers of one call: two counters (a scalar or an array each), the twelve added
/// scalars and the two output words.
pub(crate) struct ThreefryPlan {
    name: String,
    counters: [Buffer; 2],
    added: Vec<Buffer>,
    out: [Buffer; 2],
    len: usize,
    threads: usize,
}

impl ThreefryPlan {
    /// `operands` are the call's fourteen operands, `out` its tuple of two arrays.
    pub(crate) fn new(
        name: &str,
        operands: Vec<Buffer>,
        out: &Loc,
        threads: usize,
    ) -> Result<ThreefryPlan, String> {
        let bad = || format!("{name}: Threefry's rounds take 14 u32 operands and give 2 words");
        let out: [Buffer; 2] = match out {
            Loc::Tuple(items) => items
                .iter()
                .map(|l| l.as_array().cloned())
                .collect::<Option<Vec<_>>>()
                .and_then(|v| v.try_into().ok())
                .ok_or_else(bad)?,
            _ => return Err(bad()),
        };
        let len = out[0].shape.element_count() as usize;
        let u32s = |b: &Buffer| b.shape.element_type == ElementType::U32;
        let sized = |b: &Buffer, n: usize| b.shape.element_count() as usize == n;
        let ok = operands.len() == 14
            && operands.iter().chain(&out).all(u32s)
            && out[1].shape == out[0].shape
            && operands[..2].iter().all(|b| sized(b, 1) || sized(b, len))
            && operands[2..].iter().all(|b| sized(b, 1));
        if !ok {
            return Err(bad());
        }
        let mut operands = operands;
        let added = operands.split_off(2);
        let counters: [Buffer; 2] = operands.try_into().map_err(|_| bad())?;
        Ok(ThreefryPlan {
            name: name.to_string(),
            counters,
            added,
            out,
            len,
            threads,
        })
    }
}

/// # Safety
/// Called by compiled code with its own plan and arena.
pub(crate) unsafe extern "C" fn threefry_routine(
    plan: *const ThreefryPlan,
    arena: *mut u8,
) -> Status {
    let plan = &*plan;
    guarded(&plan.name, || {
        // SAFETY: every buffer is this program's, of the sizes `ThreefryPlan::new` checked.
        let word = |b: &Buffer| unsafe { *(resolve(b.addr, arena) as *const u32) };
        let counter = |b: &Buffer| match b.shape.element_count() as usize {
            n if n == plan.len && n != 1 => Words::Array(resolve(b.addr, arena) as *const u32),
            _ => Words::Splat(word(b)),
        };
        let mut added = [0u32; 12];
        for (a, b) in added.iter_mut().zip(&plan.added) {
            *a = word(b);
        }
        let [o0, o1] = &plan.out;
        threefry_rounds(
            counter(&plan.counters[0]),
            counter(&plan.counters[1]),
            &added,
            resolve(o0.addr, arena) as *mut u32,
            resolve(o1.addr, arena) as *mut u32,
            plan.len,
            plan.threads,
        );
        Ok(())
    })
}
