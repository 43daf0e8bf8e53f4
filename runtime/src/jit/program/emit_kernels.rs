//! Kernel functions `kernel(arena)` built from the kernel families (`fused_kernels/`) and
//! called from the program: whole, or, when they are large, as `kernel(arena, lo, hi)` over
//! chunks of their outermost loop that the threads claim at run time; and a split reduce's two
//! parts with the kernel combining them.

use super::compile::ProgramCx;
use crate::jit::buffer::{Addr, Buffer, Loc};
use crate::jit::clif::element_ops::Libcalls;
use crate::jit::clif::value_at_index::{Elemental, Leaf};
use crate::jit::fused_kernels::elementwise::{
    chunking, emit_elementwise_part, KernelOutput, OuterPart,
};
use crate::jit::fused_kernels::reduce;
use crate::jit::routines::kernel_pair::{tessel_run_kernel_chunks, tessel_run_kernel_pair};
use crate::jit::JitError;
use cranelift_codegen::ir::{
    types, AbiParam, Function, InstBuilder, Signature, UserFuncName, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module as _};
use std::collections::{HashMap, HashSet};
use tessel_compiler::ir::{ArrayShape, Computation, ComputationId, InstrId, Op};

/// A range `[lo, hi)` of a kernel's outermost loop.
pub(super) type Part = (i64, i64);

/// Emits a kernel's body, over all of it or over one part of its outermost loop.
pub(super) type PartBody<'b> = dyn FnMut(&mut Elemental, OuterPart) -> Result<(), JitError> + 'b;

/// Emits a kernel's body, given the kernel function's arguments after the arena.
type KernelBody<'b> = dyn FnMut(&mut Elemental, &[Value]) -> Result<(), JitError> + 'b;

/// How a kernel's outermost loop may be cut into chunks: `(end, align)`, its length and a
/// multiple every chunk starts at.
pub(super) type Chunking = (i64, i64);

/// Kernels with at least this much work run in chunks on all threads: elements written times
/// the operations computing each (see [`ops_per_element`]). So a plain copy or add splits from
/// 64K elements, and the dropout mask's Threefry rounds (16K elements, four to a dozen integer
/// operations each, about 20 µs on one thread) split too.
const PARALLEL_KERNEL_WORK: i64 = 1 << 16;

/// The operations computing one element of `roots` in `comp`, at least one: the instructions
/// they reach without passing a leaf (a value read from a buffer), except the parameters,
/// constants and tuples, and the broadcasts, reshapes and bitcasts that only index.
pub(super) fn ops_per_element(
    comp: &Computation,
    roots: &[InstrId],
    leaves: &HashMap<InstrId, Leaf>,
) -> i64 {
    let mut seen = HashSet::new();
    let mut stack: Vec<InstrId> = roots.to_vec();
    let mut ops = 0;
    while let Some(id) = stack.pop() {
        if leaves.contains_key(&id) || !seen.insert(id) {
            continue;
        }
        let instr = comp.get(id);
        let indexes_only = matches!(
            instr.op,
            Op::Parameter(_)
                | Op::Constant(_)
                | Op::Tuple
                | Op::GetTupleElement { .. }
                | Op::Broadcast { .. }
                | Op::Reshape
                | Op::Bitcast
        );
        ops += i64::from(!indexes_only);
        stack.extend(instr.operands().iter().copied());
    }
    ops.max(1)
}

impl ProgramCx<'_> {
    /// Builds a kernel function `kernel(arena)` with `body` and calls it from the program.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn kernel(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        comp: ComputationId,
        leaves: HashMap<InstrId, Leaf>,
        outputs: &[Addr],
        body: &mut dyn FnMut(&mut Elemental) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        let (id, fname) = self.build_kernel(name, comp, leaves, outputs, body)?;
        let fref = self.jit.declare_func_in_func(id, fb.func);
        fb.ins().call(fref, &[arena]);
        if let Some(p) = &mut self.profile {
            let slot = p.add_slot(&fname, self.current_op);
            self.profile_mark(fb, slot);
        }
        Ok(())
    }

    /// An elementwise kernel computing `outputs` over `shape` (see [`Self::split_kernel`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn elementwise_kernel(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        comp: ComputationId,
        leaves: HashMap<InstrId, Leaf>,
        outputs: &[KernelOutput],
        shape: &ArrayShape,
    ) -> Result<(), JitError> {
        let vec = self.options.vectorize;
        let addrs: Vec<Addr> = outputs.iter().map(|o| o.addr).collect();
        let roots: Vec<InstrId> = outputs.iter().map(|o| o.root).collect();
        let ops = ops_per_element(self.module.computation(comp), &roots, &leaves);
        self.split_kernel(
            fb,
            arena,
            name,
            comp,
            leaves,
            &addrs,
            shape.element_count().saturating_mul(ops),
            &|e| chunking(e, outputs, shape),
            &mut |e, part| emit_elementwise_part(e, outputs, shape, vec, part),
        )
    }

    /// A kernel doing `work` (elements written times operations each, see
    /// [`PARALLEL_KERNEL_WORK`]). When the GEMM may use several threads, the work is large and
    /// `chunking` finds how to cut its outermost loop, it is built as `kernel(arena, lo, hi)`,
    /// `body` over `[lo, hi)`, and run over chunks of the loop that the threads claim as they
    /// become free (`tessel_run_kernel_chunks`): a thread the host deschedules holds up at most
    /// one chunk, where a fixed half would hold up the other thread for all of its own.
    /// Otherwise it is one kernel, `body` over the whole loop.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn split_kernel(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        comp: ComputationId,
        leaves: HashMap<InstrId, Leaf>,
        addrs: &[Addr],
        work: i64,
        chunking: &dyn Fn(&Elemental) -> Option<Chunking>,
        body: &mut PartBody,
    ) -> Result<(), JitError> {
        let small = work < PARALLEL_KERNEL_WORK;
        let threads = self.options.gemm_threads;
        if threads < 2 || small {
            return self.kernel(fb, arena, name, comp, leaves, addrs, &mut |e| {
                body(e, OuterPart::Whole)
            });
        }
        let mut cut = None;
        let (kernel, fname) =
            self.build_kernel_with_range(name, comp, leaves, addrs, &mut |e, lo, hi| {
                cut = chunking(e);
                let part = match cut {
                    Some(_) => OuterPart::Chunk(lo, hi),
                    None => OuterPart::Whole,
                };
                body(e, part)
            })?;
        let kernel_ref = self.jit.declare_func_in_func(kernel, fb.func);
        match cut {
            None => {
                let zero = fb.ins().iconst(types::I64, 0);
                fb.ins().call(kernel_ref, &[arena, zero, zero]);
            }
            Some((end, align)) => {
                self.chunked_kernels += 1;
                let chunk =
                    tessel_kernels::parallel::chunk_len(end as usize, threads, align as usize);
                let f = fb.ins().func_addr(types::I64, kernel_ref);
                let mut sig = Signature::new(self.call_conv);
                sig.params.extend([AbiParam::new(types::I64); 5]);
                let sigref = fb.import_signature(sig);
                let callee = self
                    .symbols
                    .function(fb, tessel_run_kernel_chunks as *const () as usize);
                let args =
                    [end, chunk as i64, threads as i64].map(|v| fb.ins().iconst(types::I64, v));
                fb.ins()
                    .call_indirect(sigref, callee, &[f, arena, args[0], args[1], args[2]]);
            }
        }
        if let Some(p) = &mut self.profile {
            let slot = p.add_slot(&fname, self.current_op);
            self.profile_mark(fb, slot);
        }
        Ok(())
    }

    /// Calls two kernels that write disjoint memory on two workers
    /// (`tessel_run_kernel_pair`).
    pub(super) fn call_kernel_pair(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        first: FuncId,
        second: FuncId,
    ) {
        let first_ref = self.jit.declare_func_in_func(first, fb.func);
        let second_ref = self.jit.declare_func_in_func(second, fb.func);
        let a = fb.ins().func_addr(types::I64, first_ref);
        let b = fb.ins().func_addr(types::I64, second_ref);
        let mut sig = Signature::new(self.call_conv);
        sig.params.extend([AbiParam::new(types::I64); 3]);
        let sigref = fb.import_signature(sig);
        let callee = self
            .symbols
            .function(fb, tessel_run_kernel_pair as *const () as usize);
        fb.ins().call_indirect(sigref, callee, &[a, b, arena]);
    }

    /// A reduce computed in two parts cut at `(mid, end)` of its operand's first dimension
    /// (`reduce::reduce_split`): rows `[0, mid)` into the output and `[mid, end)` into scratch,
    /// on two workers when the GEMM may use two threads, else one after the other; then a
    /// third kernel combines them. The parts are the same whatever the thread count.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn split_reduce(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        comp: ComputationId,
        root: InstrId,
        leaves: HashMap<InstrId, Leaf>,
        out: &Loc,
        (mid, end): Part,
    ) -> Result<(), JitError> {
        let vec = self.options.vectorize;
        let outputs: Vec<Buffer> = out.leaves().into_iter().cloned().collect();
        let addrs: Vec<Addr> = outputs.iter().map(|b| b.addr).collect();
        let partials: Vec<Addr> = outputs
            .iter()
            .map(|b| self.take_partial_scratch(b.byte_size()))
            .collect::<Result<_, _>>()?;
        let (first, fname) = self.build_kernel(name, comp, leaves.clone(), &addrs, &mut |e| {
            reduce::emit_reduce_part(e, root, &addrs, vec, Some((0, mid)))
        })?;
        let (second, _) = self.build_kernel(name, comp, leaves, &partials, &mut |e| {
            reduce::emit_reduce_part(e, root, &partials, vec, Some((mid, end)))
        })?;
        self.call_parts_and_combine(
            fb,
            arena,
            name,
            comp,
            root,
            [first, second],
            &addrs,
            &partials,
        )?;
        if let Some(p) = &mut self.profile {
            let slot = p.add_slot(&fname, self.current_op);
            self.profile_mark(fb, slot);
        }
        Ok(())
    }

    /// Runs the two parts of a split reduce (on two workers when the GEMM may use two
    /// threads, else one after the other), then a kernel combining `partials` into `outputs`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call_parts_and_combine(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        comp: ComputationId,
        red: InstrId,
        [first, second]: [FuncId; 2],
        outputs: &[Addr],
        partials: &[Addr],
    ) -> Result<(), JitError> {
        if self.options.gemm_threads >= 2 {
            self.call_kernel_pair(fb, arena, first, second);
        } else {
            for k in [first, second] {
                let r = self.jit.declare_func_in_func(k, fb.func);
                fb.ins().call(r, &[arena]);
            }
        }
        let vec = self.options.vectorize;
        let mut both = outputs.to_vec();
        both.extend(partials);
        let (combine, _) = self.build_kernel(name, comp, HashMap::new(), &both, &mut |e| {
            reduce::emit_reduce_combine(e, red, outputs, partials, vec)
        })?;
        let r = self.jit.declare_func_in_func(combine, fb.func);
        fb.ins().call(r, &[arena]);
        Ok(())
    }

    /// Builds a kernel function `kernel(arena)` with `body`; returns it and its symbol.
    pub(super) fn build_kernel(
        &mut self,
        name: &str,
        comp: ComputationId,
        leaves: HashMap<InstrId, Leaf>,
        outputs: &[Addr],
        body: &mut dyn FnMut(&mut Elemental) -> Result<(), JitError>,
    ) -> Result<(FuncId, String), JitError> {
        self.build_kernel_of(name, comp, leaves, outputs, 0, &mut |e, _| body(e))
    }

    /// [`Self::build_kernel`] of a kernel `kernel(arena, lo, hi)`: `body` gets `lo` and `hi`.
    fn build_kernel_with_range(
        &mut self,
        name: &str,
        comp: ComputationId,
        leaves: HashMap<InstrId, Leaf>,
        outputs: &[Addr],
        body: &mut dyn FnMut(&mut Elemental, Value, Value) -> Result<(), JitError>,
    ) -> Result<(FuncId, String), JitError> {
        self.build_kernel_of(name, comp, leaves, outputs, 2, &mut |e, range| {
            body(e, range[0], range[1])
        })
    }

    /// A kernel function taking the arena and `extra` more 64-bit arguments, which `body`
    /// gets.
    fn build_kernel_of(
        &mut self,
        name: &str,
        comp: ComputationId,
        leaves: HashMap<InstrId, Leaf>,
        outputs: &[Addr],
        extra: usize,
        body: &mut KernelBody,
    ) -> Result<(FuncId, String), JitError> {
        let mut sig = Signature::new(self.call_conv);
        sig.params
            .extend((0..=extra).map(|_| AbiParam::new(types::I64)));
        let fname = format!("k{}_{}", self.kernels, sanitize(name));
        self.kernels += 1;
        let id = self
            .jit
            .declare_function(&fname, Linkage::Local, &sig)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
        {
            let mut kfbc = FunctionBuilderContext::new();
            let mut kfb = FunctionBuilder::new(&mut func, &mut kfbc);
            let b0 = kfb.create_block();
            kfb.append_block_params_for_function_params(b0);
            kfb.switch_to_block(b0);
            kfb.seal_block(b0);
            let params = kfb.block_params(b0).to_vec();
            let module = self.module;
            let mut e = Elemental::new(
                &mut kfb,
                module,
                module.computation(comp),
                &leaves,
                params[0],
                self.features.fma,
                Libcalls {
                    call_conv: self.call_conv,
                    symbols: &self.symbols,
                },
            );
            e.hoist_addresses(outputs);
            body(&mut e, &params[1..]).map_err(|err| err.at(name))?;
            kfb.ins().return_(&[]);
            kfb.finalize(self.isa.frontend_config());
        }
        self.define(id, func, &fname)?;
        Ok((id, fname))
    }
}

/// A symbol-safe form of an instruction name.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
