//! The whole program as one native function.
//!
//! The entry computation is walked in dependency order. Each step becomes a call from the
//! program function `tessel_program(arena) -> status`: a kernel function (elementwise loop
//! nest, reduce, reduce-window, select-and-scatter), or a Rust routine (dot, convolution)
//! whose non-zero status returns at once. Tuples, get-tuple-element, reshape, bitcast and copy
//! only rename buffers. `call` is inlined, `while` is a native loop whose state buffers are
//! updated in place, `conditional` a native branch. Every buffer is placed in one arena.

use super::buffer::{Addr, Buffer, ConstPool, Loc};
use super::collectives::{collective_routine, CollectivePlan};
use super::conv_select::{plan_convolution, ConvPrecision};
use super::elemental::{Elemental, Leaf};
use super::elementwise::Libcalls;
use super::feed_ops::{infeed_routine, outfeed_routine, InfeedPlan, OutfeedPlan};
use super::gemm::{dot_routine, DotPlan};
use super::isa::{host_isa, HostFeatures};
use super::kernel_lowering::{emit_elementwise_part, split_point, KernelOutput};
use super::loop_state;
use super::parallel::tessel_run_kernel_pair;
use super::profile::{tessel_profile_mark, ProfileCounters, RESTART};
use super::{reduce, reduce_fused, window, window_tiled, JitError, JitOptions};
use crate::arena::ArenaLayout;
use crate::executable::{Executable, ExecutableParts, ProgramStats};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Function, InstBuilder, MemFlagsData, Signature, UserFuncName, Value,
};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module as _};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tessel_compiler::ir::{
    ArrayShape, Computation, ComputationId, InstrId, Literal, Module, Op, Shape,
};

/// A range `[lo, hi)` of a kernel's outermost loop.
type Part = (i64, i64);

/// Emits a kernel's body, over all of it (`None`) or over one part.
type PartBody<'b> = dyn FnMut(&mut Elemental, Option<Part>) -> Result<(), JitError> + 'b;

/// Kernels at least this large run as two halves on two threads.
const PARALLEL_KERNEL_ELEMENTS: i64 = 1 << 16;

/// State while lowering one module.
struct ProgramCx<'m> {
    module: &'m Module,
    options: &'m JitOptions,
    isa: OwnedTargetIsa,
    features: HostFeatures,
    jit: JITModule,
    layout: ArenaLayout,
    consts: ConstPool,
    plans: Vec<Box<dyn Any + Send + Sync>>,
    libcalls: Libcalls,
    kernels: usize,
    routine_sig: Option<cranelift_codegen::ir::SigRef>,
    error_block: Option<cranelift_codegen::ir::Block>,
    dump_index: usize,
    /// Live references to each arena block; a block is reused once nothing refers to it.
    refs: HashMap<usize, u32>,
    /// Per-kernel time counters, when `JitOptions::profile` is on.
    profile: Option<Box<ProfileCounters>>,
    mark_sig: Option<cranelift_codegen::ir::SigRef>,
    /// The opcode of the instruction being lowered (names profile slots).
    current_op: &'static str,
    /// The name of the instruction being lowered.
    current_name: String,
    /// The module, shared by the collective routines' plans (made on first use).
    shared_module: Option<Arc<Module>>,
    /// Every scratch request of an instruction: its name and the bytes asked for.
    scratch_log: Vec<(String, usize)>,
}

/// Compiles `module` (see [`super::compile`]).
pub fn compile_module(module: &Module, options: &JitOptions) -> Result<Executable, JitError> {
    let start = Instant::now();
    let (isa, features) = host_isa(&options.opt_level)?;
    let jit = JITModule::new(JITBuilder::with_isa(isa.clone(), default_libcall_names()));
    let call_conv = isa.default_call_conv();
    if let Some(dir) = &options.dump_to {
        std::fs::create_dir_all(dir)
            .map_err(|e| JitError::Io(format!("{}: {e}", dir.display())))?;
    }
    let mut cx = ProgramCx {
        module,
        options,
        isa,
        features,
        jit,
        layout: ArenaLayout::new(),
        consts: ConstPool::default(),
        plans: Vec::new(),
        libcalls: Libcalls { call_conv },
        kernels: 0,
        routine_sig: None,
        error_block: None,
        dump_index: 0,
        refs: HashMap::new(),
        profile: options.profile.then(Box::default),
        mark_sig: None,
        current_op: "",
        current_name: String::new(),
        shared_module: None,
        scratch_log: Vec::new(),
    };

    let mut sig = Signature::new(call_conv);
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I32));
    let entry_id = cx
        .jit
        .declare_function("tessel_program", Linkage::Export, &sig)
        .map_err(|e| JitError::Codegen(e.to_string()))?;
    let mut func = Function::with_name_signature(UserFuncName::user(0, entry_id.as_u32()), sig);
    let mut fbc = FunctionBuilderContext::new();
    let mut fb = FunctionBuilder::new(&mut func, &mut fbc);
    let block0 = fb.create_block();
    fb.append_block_params_for_function_params(block0);
    fb.switch_to_block(block0);
    fb.seal_block(block0);
    let arena = fb.block_params(block0)[0];
    cx.profile_mark(&mut fb, RESTART);

    let entry = module.entry();
    let mut params = Vec::new();
    for p in entry.parameters() {
        params.push(cx.alloc_loc(&entry.get(p).shape)?);
    }
    let result = cx.emit_computation(&mut fb, arena, module.entry, &params, None)?;
    let zero = fb.ins().iconst(types::I32, 0);
    fb.ins().return_(&[zero]);
    if let Some(err) = cx.error_block {
        fb.switch_to_block(err);
        fb.seal_block(err);
        let status = fb.block_params(err)[0];
        fb.ins().return_(&[status]);
    }
    fb.finalize(cx.isa.frontend_config());
    cx.define(entry_id, func, "program")?;
    cx.jit
        .finalize_definitions()
        .map_err(|e| JitError::Codegen(e.to_string()))?;
    let entry_ptr = cx.jit.get_finalized_function(entry_id);
    let stats = ProgramStats {
        kernels: cx.kernels,
        arena_bytes: cx.layout.size(),
        buffers: cx.layout.buffer_count(),
        constant_bytes: cx.consts.total_bytes(),
        compile_ms: start.elapsed().as_secs_f64() * 1e3,
        scratch: std::mem::take(&mut cx.scratch_log),
    };
    Ok(Executable::new(ExecutableParts {
        jit: cx.jit,
        entry: entry_ptr,
        arena_size: cx.layout.size(),
        params,
        result,
        consts: cx.consts,
        plans: cx.plans,
        profile: cx.profile,
        stats,
    }))
}

impl<'m> ProgramCx<'m> {
    fn alloc(&mut self, bytes: usize) -> Addr {
        Addr::Arena(self.layout.alloc(bytes))
    }

    /// Scratch space for the instruction being lowered, logged for [`ProgramStats::scratch`].
    fn alloc_scratch(&mut self, bytes: usize) -> Addr {
        self.scratch_log.push((self.current_name.clone(), bytes));
        self.alloc(bytes)
    }

    fn retain(&mut self, loc: &Loc) {
        for b in loc.leaves() {
            if let Addr::Arena(off) = b.addr {
                *self.refs.entry(off).or_insert(0) += 1;
            }
        }
    }

    fn release(&mut self, loc: &Loc) {
        for b in loc.leaves() {
            if let Addr::Arena(off) = b.addr {
                let r = self.refs.entry(off).or_insert(0);
                *r = r.saturating_sub(1);
                if *r == 0 {
                    self.refs.remove(&off);
                    self.layout.free(off);
                }
            }
        }
    }

    /// Builds a routine's plan with scratch space that only that routine call uses: the
    /// scratch is allocated while planning and freed right after, so later values reuse it.
    fn with_scratch<T>(
        &mut self,
        build: impl FnOnce(&mut dyn FnMut(usize) -> Addr) -> Result<T, JitError>,
    ) -> Result<T, JitError> {
        let mut used = Vec::new();
        let plan = build(&mut |n: usize| {
            let a = self.alloc_scratch(n);
            used.push(a);
            a
        });
        self.free_scratch(used);
        plan
    }

    /// Frees scratch space used by one routine call only.
    fn free_scratch(&mut self, scratch: Vec<Addr>) {
        for a in scratch {
            if let Addr::Arena(off) = a {
                self.layout.free(off);
            }
        }
    }

    /// Keeps `plan` alive as long as the program and emits the call `f(plan, arena)`.
    fn call_plan<P: Any + Send + Sync>(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        f: usize,
        plan: P,
    ) {
        self.call_boxed_plan(fb, arena, f, Box::new(plan));
    }

    /// [`Self::call_plan`] for a plan already boxed: `f` receives a pointer to the boxed value.
    fn call_boxed_plan(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        f: usize,
        plan: Box<dyn Any + Send + Sync>,
    ) {
        let p = &*plan as *const (dyn Any + Send + Sync) as *const () as usize;
        self.plans.push(plan);
        self.routine(fb, arena, f, p);
    }

    fn alloc_loc(&mut self, shape: &Shape) -> Result<Loc, JitError> {
        Ok(match shape {
            Shape::Array(a) => {
                super::types::scalar_type(a.element_type)?;
                if !a.is_static() {
                    return Err(JitError::Unsupported(format!("dynamic shape {shape}")));
                }
                Loc::Array(Buffer {
                    addr: self.alloc(a.byte_size() as usize),
                    shape: a.clone(),
                })
            }
            Shape::Tuple(t) => Loc::Tuple(
                t.iter()
                    .map(|s| self.alloc_loc(s))
                    .collect::<Result<_, _>>()?,
            ),
            Shape::Token => Loc::Token,
        })
    }

    fn const_loc(&mut self, lit: &Literal) -> Result<Loc, JitError> {
        Ok(match lit {
            Literal::Array(a) => {
                super::types::scalar_type(a.element_type())?;
                let addr = self.consts.add(&a.data.to_le_bytes());
                Loc::Array(Buffer {
                    addr: Addr::Absolute(addr),
                    shape: a.shape.clone(),
                })
            }
            Literal::Tuple(t) => Loc::Tuple(
                t.iter()
                    .map(|l| self.const_loc(l))
                    .collect::<Result<_, _>>()?,
            ),
            Literal::Token => Loc::Token,
        })
    }

    /// Compiles a function and adds it to the module, dumping its CLIF when asked.
    fn define(
        &mut self,
        id: cranelift_module::FuncId,
        func: Function,
        what: &str,
    ) -> Result<(), JitError> {
        let mut ctx = Context::for_function(func);
        if let Some(dir) = &self.options.dump_to {
            let n = self.dump_index;
            self.dump_index += 1;
            let before = dir.join(format!("{n:04}.{what}.before_opt.clif"));
            std::fs::write(&before, ctx.func.display().to_string())
                .map_err(|e| JitError::Io(format!("{}: {e}", before.display())))?;
            let mut opt = Context::for_function(ctx.func.clone());
            opt.optimize(&*self.isa, &mut Default::default())
                .map_err(|e| JitError::Codegen(format!("{what}: {e:?}")))?;
            let after = dir.join(format!("{n:04}.{what}.after_opt.clif"));
            std::fs::write(&after, opt.func.display().to_string())
                .map_err(|e| JitError::Io(format!("{}: {e}", after.display())))?;
        }
        self.jit
            .define_function(id, &mut ctx)
            .map_err(|e| JitError::Codegen(format!("{what}: {e:?}")))
    }

    /// Builds a kernel function `kernel(arena)` with `body` and calls it from the program.
    #[allow(clippy::too_many_arguments)]
    fn kernel(
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
    fn elementwise_kernel(
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
        self.split_kernel(
            fb,
            arena,
            name,
            comp,
            leaves,
            &addrs,
            shape.element_count(),
            &|e| split_point(e, outputs, shape),
            &mut |e, part| emit_elementwise_part(e, outputs, shape, vec, part),
        )
    }

    /// A kernel that writes `elements` values. When the GEMM may use several threads, the
    /// kernel is large and `split` finds a cut `(mid, end)` of its outermost loop, it is built
    /// as two kernels, `body` over `[0, mid)` and over `[mid, end)`, which run on two threads
    /// (`tessel_run_kernel_pair`); otherwise as one kernel, `body` with no part.
    #[allow(clippy::too_many_arguments)]
    fn split_kernel(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        comp: ComputationId,
        leaves: HashMap<InstrId, Leaf>,
        addrs: &[Addr],
        elements: i64,
        split: &dyn Fn(&Elemental) -> Option<Part>,
        body: &mut PartBody,
    ) -> Result<(), JitError> {
        if self.options.gemm_threads < 2 || elements < PARALLEL_KERNEL_ELEMENTS {
            return self.kernel(fb, arena, name, comp, leaves, addrs, &mut |e| body(e, None));
        }
        let mut cut = None;
        let (first, fname) = self.build_kernel(name, comp, leaves.clone(), addrs, &mut |e| {
            cut = split(e);
            body(e, cut.map(|(mid, _)| (0, mid)))
        })?;
        match cut {
            None => {
                let first_ref = self.jit.declare_func_in_func(first, fb.func);
                fb.ins().call(first_ref, &[arena]);
            }
            Some((mid, end)) => {
                let (second, _) = self.build_kernel(name, comp, leaves, addrs, &mut |e| {
                    body(e, Some((mid, end)))
                })?;
                self.call_kernel_pair(fb, arena, first, second);
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
    fn call_kernel_pair(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        first: cranelift_module::FuncId,
        second: cranelift_module::FuncId,
    ) {
        let first_ref = self.jit.declare_func_in_func(first, fb.func);
        let second_ref = self.jit.declare_func_in_func(second, fb.func);
        let a = fb.ins().func_addr(types::I64, first_ref);
        let b = fb.ins().func_addr(types::I64, second_ref);
        let mut sig = Signature::new(self.libcalls.call_conv);
        sig.params.extend([AbiParam::new(types::I64); 3]);
        let sigref = fb.import_signature(sig);
        let callee = fb
            .ins()
            .iconst(types::I64, tessel_run_kernel_pair as *const () as i64);
        fb.ins().call_indirect(sigref, callee, &[a, b, arena]);
    }

    /// A reduce computed in two parts cut at `(mid, end)` of its operand's first dimension
    /// (`reduce::reduce_split`): rows `[0, mid)` into the output and `[mid, end)` into scratch,
    /// on two workers when the GEMM may use two threads, else one after the other; then a
    /// third kernel combines them. The parts are the same whatever the thread count.
    #[allow(clippy::too_many_arguments)]
    fn split_reduce(
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
            .map(|b| self.alloc_scratch(b.byte_size()))
            .collect();
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
        self.free_scratch(partials);
        Ok(())
    }

    /// Builds a kernel function `kernel(arena)` with `body`; returns it and its symbol.
    fn build_kernel(
        &mut self,
        name: &str,
        comp: ComputationId,
        leaves: HashMap<InstrId, Leaf>,
        outputs: &[Addr],
        body: &mut dyn FnMut(&mut Elemental) -> Result<(), JitError>,
    ) -> Result<(cranelift_module::FuncId, String), JitError> {
        let mut sig = Signature::new(self.libcalls.call_conv);
        sig.params.push(AbiParam::new(types::I64));
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
            let karena = kfb.block_params(b0)[0];
            let module = self.module;
            let mut e = Elemental::new(
                &mut kfb,
                module,
                module.computation(comp),
                &leaves,
                &mut self.consts,
                karena,
                self.features.fma,
                &self.libcalls,
            );
            e.hoist_addresses(outputs);
            body(&mut e).map_err(|err| err.at(name))?;
            kfb.ins().return_(&[]);
            kfb.finalize(self.isa.frontend_config());
        }
        self.define(id, func, &fname)?;
        Ok((id, fname))
    }

    /// Emits a call to [`tessel_profile_mark`] when profiling (see `profile.rs`).
    fn profile_mark(&mut self, fb: &mut FunctionBuilder, slot: u64) {
        let Some(p) = &self.profile else { return };
        let counters = &**p as *const ProfileCounters as i64;
        let sigref = *self.mark_sig.get_or_insert_with(|| {
            let mut sig = Signature::new(self.libcalls.call_conv);
            sig.params.push(AbiParam::new(types::I64));
            sig.params.push(AbiParam::new(types::I64));
            fb.import_signature(sig)
        });
        let callee = fb
            .ins()
            .iconst(types::I64, tessel_profile_mark as *const () as i64);
        let c = fb.ins().iconst(types::I64, counters);
        let s = fb.ins().iconst(types::I64, slot as i64);
        fb.ins().call_indirect(sigref, callee, &[c, s]);
    }

    /// Calls a Rust routine `f(plan, arena) -> status`; a non-zero status leaves the program.
    fn routine(&mut self, fb: &mut FunctionBuilder, arena: Value, f: usize, plan: usize) {
        let sigref = match self.routine_sig {
            Some(s) => s,
            None => {
                let mut sig = Signature::new(self.libcalls.call_conv);
                sig.params.push(AbiParam::new(types::I64));
                sig.params.push(AbiParam::new(types::I64));
                sig.returns.push(AbiParam::new(types::I32));
                let s = fb.import_signature(sig);
                self.routine_sig = Some(s);
                s
            }
        };
        let callee = fb.ins().iconst(types::I64, f as i64);
        let p = fb.ins().iconst(types::I64, plan as i64);
        let call = fb.ins().call_indirect(sigref, callee, &[p, arena]);
        let status = fb.inst_results(call)[0];
        if let Some(prof) = &mut self.profile {
            let slot = prof.add_slot(&self.current_name, self.current_op);
            self.profile_mark(fb, slot);
        }
        let err = *self.error_block.get_or_insert_with(|| {
            let b = fb.create_block();
            fb.append_block_param(b, types::I32);
            b
        });
        let cont = fb.create_block();
        fb.ins().brif(status, err, &[status.into()], cont, &[]);
        fb.seal_block(cont);
        fb.switch_to_block(cont);
    }

    /// Emits computation `cid` on `args`. `dest`, when given, is where the caller will copy
    /// the (tuple) result: root elements are written there directly when that is safe (see
    /// `loop_state.rs`).
    fn emit_computation(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        cid: ComputationId,
        args: &[Loc],
        dest: Option<&Loc>,
    ) -> Result<Loc, JitError> {
        let module = self.module;
        let comp = module.computation(cid);
        let mut locs: HashMap<InstrId, Loc> = HashMap::new();
        // Every materialized array so far: what a kernel reads instead of recomputing.
        let mut materialized: HashMap<InstrId, Leaf> = HashMap::new();
        let fused = super::fusion::plan(comp);
        let dying = super::fusion::last_uses(comp, &fused);
        let order: Vec<InstrId> = comp
            .post_order()
            .into_iter()
            .filter(|id| !fused.contains(id))
            .collect();
        let slots = loop_state::root_slots(comp, dest);
        for (pos, &id) in order.iter().enumerate() {
            let instr = comp.get(id);
            self.current_op = instr.op.opcode_name();
            self.current_name.clone_from(&instr.name);
            let operand = |k: usize| -> Result<&Loc, JitError> {
                locs.get(&instr.operands()[k]).ok_or_else(|| {
                    JitError::Invalid(format!("{}: operand {k} not computed", instr.name))
                })
            };
            let array = |k: usize| -> Result<Buffer, JitError> {
                operand(k)?.as_array().cloned().ok_or_else(|| {
                    JitError::Invalid(format!("{}: operand {k} is not an array", instr.name))
                })
            };
            let loc = match &instr.op {
                Op::Parameter(n) => args.get(*n as usize).cloned().ok_or_else(|| {
                    JitError::Invalid(format!("{}: no argument for parameter {n}", comp.name))
                })?,
                Op::Constant(lit) => self.const_loc(lit)?,
                Op::Tuple => Loc::Tuple(
                    (0..instr.operands().len())
                        .map(|k| operand(k).cloned())
                        .collect::<Result<_, _>>()?,
                ),
                Op::GetTupleElement { index } => match operand(0)? {
                    Loc::Tuple(t) => t.get(*index as usize).cloned().ok_or_else(|| {
                        JitError::Invalid(format!("{}: tuple index out of range", instr.name))
                    })?,
                    _ => {
                        return Err(JitError::Invalid(format!(
                            "{}: get-tuple-element of a non-tuple",
                            instr.name
                        )))
                    }
                },
                Op::Reshape | Op::Bitcast | Op::Copy if instr.shape.is_array() => {
                    let b = array(0)?;
                    let shape = instr.shape.as_array().cloned().expect("array");
                    if shape.byte_size() != b.shape.byte_size() {
                        return Err(JitError::Invalid(format!(
                            "{}: reshape changes the size",
                            instr.name
                        )));
                    }
                    Loc::Array(Buffer {
                        addr: b.addr,
                        shape,
                    })
                }
                Op::Copy => operand(0)?.clone(),
                Op::AfterAll => Loc::Token,
                Op::AllReduce { .. }
                | Op::AllGather { .. }
                | Op::ReduceScatter { .. }
                | Op::CollectivePermute { .. }
                | Op::ReplicaId
                | Op::PartitionId => {
                    // A host routine that meets the replica group (see `collectives.rs`); the
                    // replica count is only known when the program runs.
                    let operands: Vec<Buffer> = (0..instr.operands().len())
                        .map(&array)
                        .collect::<Result<_, _>>()?;
                    let out = self.alloc_loc(&instr.shape)?;
                    let shared = self
                        .shared_module
                        .get_or_insert_with(|| Arc::new(module.clone()))
                        .clone();
                    let plan = CollectivePlan::new(&instr.name, shared, cid, id, operands, &out)?;
                    self.call_plan(fb, arena, collective_routine as *const () as usize, plan);
                    out
                }
                Op::Call { to_apply } => {
                    let a: Vec<Loc> = (0..instr.operands().len())
                        .map(|k| operand(k).cloned())
                        .collect::<Result<_, _>>()?;
                    self.emit_computation(fb, arena, *to_apply, &a, None)?
                }
                Op::While { condition, body } => {
                    let init = operand(0)?.clone();
                    self.emit_while(fb, arena, &instr.shape, init, *condition, *body)?
                }
                Op::Conditional { branches } => {
                    let a: Vec<Loc> = (0..instr.operands().len())
                        .map(|k| operand(k).cloned())
                        .collect::<Result<_, _>>()?;
                    self.emit_conditional(fb, arena, &instr.shape, &a, branches)?
                }
                Op::Dot(dnums) => {
                    let (l, r) = (array(0)?, array(1)?);
                    let out = self.alloc_loc(&instr.shape)?;
                    let oaddr = out.as_array().expect("array").addr;
                    let (backend, threads) = (self.options.gemm, self.options.gemm_threads);
                    let plan = self.with_scratch(|scratch| {
                        DotPlan::new(
                            &instr.name,
                            dnums,
                            (l.addr, &l.shape),
                            (r.addr, &r.shape),
                            oaddr,
                            backend,
                            threads,
                            scratch,
                        )
                    })?;
                    self.call_plan(fb, arena, dot_routine as *const () as usize, plan);
                    out
                }
                Op::Convolution(conv) => {
                    let (l, r) = (array(0)?, array(1)?);
                    let out = self.alloc_loc(&instr.shape)?;
                    let ob = out.as_array().expect("array").clone();
                    let options = self.options;
                    let precision = ConvPrecision::of(&instr.extra_attrs);
                    let conv = self.with_scratch(|scratch| {
                        plan_convolution(
                            &instr.name,
                            conv,
                            precision,
                            (l.addr, &l.shape),
                            (r.addr, &r.shape),
                            (ob.addr, &ob.shape),
                            options,
                            scratch,
                        )
                    })?;
                    self.call_boxed_plan(fb, arena, conv.routine, conv.plan);
                    out
                }
                Op::Fusion { calls, .. } => {
                    let a: Vec<Loc> = (0..instr.operands().len())
                        .map(|k| operand(k).cloned())
                        .collect::<Result<_, _>>()?;
                    let read_here = dying_locs(&dying, pos, &locs);
                    let slot = slots.get(&id).filter(|slot| {
                        let fused_comp = module.computation(*calls);
                        loop_state::can_write_in_place(
                            slot,
                            &instr.shape,
                            &self.refs,
                            &read_here,
                            || {
                                fusion_leaves(fused_comp, &a).is_some_and(|leaves| {
                                    loop_state::reads_only_aligned(
                                        fused_comp,
                                        fused_comp.root(),
                                        &leaves,
                                        slot.addr,
                                    )
                                })
                            },
                        )
                    });
                    let out = match slot {
                        Some(b) => Loc::Array(b.clone()),
                        None => self.alloc_loc(&instr.shape)?,
                    };
                    self.emit_fusion(fb, arena, &instr.name, *calls, &a, out)?
                }
                Op::Infeed { .. } => {
                    // The host routine copies the replica's next value into these buffers.
                    let out = self.alloc_loc(&instr.shape)?;
                    let plan = InfeedPlan::new(&instr.name, &out).map_err(JitError::Invalid)?;
                    self.call_plan(fb, arena, infeed_routine as *const () as usize, plan);
                    out
                }
                Op::Outfeed { .. } => {
                    let plan = OutfeedPlan::new(&instr.name, operand(0)?);
                    self.call_plan(fb, arena, outfeed_routine as *const () as usize, plan);
                    Loc::Token
                }
                Op::CustomCall { .. } => {
                    return Err(JitError::Unsupported(format!(
                        "{} ({})",
                        instr.op.opcode_name(),
                        instr.name
                    )))
                }
                _ => {
                    // Any other op is a kernel rooted at this instruction; it reads the
                    // materialized values and recomputes the fused instructions in between.
                    let read_here = dying_locs(&dying, pos, &locs);
                    let slot = slots.get(&id).filter(|slot| {
                        loop_state::can_write_in_place(
                            slot,
                            &instr.shape,
                            &self.refs,
                            &read_here,
                            || loop_state::reads_only_aligned(comp, id, &materialized, slot.addr),
                        )
                    });
                    let out = match slot {
                        Some(b) => Loc::Array(b.clone()),
                        None => self.alloc_loc(&instr.shape)?,
                    };
                    self.emit_kernel_for(
                        fb,
                        arena,
                        &instr.name,
                        cid,
                        id,
                        materialized.clone(),
                        &out,
                    )?;
                    out
                }
            };
            if let Loc::Array(b) = &loc {
                materialized.insert(
                    id,
                    Leaf {
                        addr: b.addr,
                        shape: b.shape.clone(),
                    },
                );
            }
            // Call, while and conditional results come back with their references held.
            if !matches!(
                instr.op,
                Op::Call { .. } | Op::While { .. } | Op::Conditional { .. }
            ) {
                self.retain(&loc);
            }
            locs.insert(id, loc);
            for dead in dying.get(&pos).into_iter().flatten() {
                if let Some(l) = locs.get(dead).cloned() {
                    self.release(&l);
                    materialized.remove(dead);
                }
            }
        }
        locs.remove(&comp.root())
            .ok_or_else(|| JitError::Invalid(format!("{} has no root", comp.name)))
    }

    /// One kernel computing instruction `root` of `comp` into `out`.
    #[allow(clippy::too_many_arguments)]
    fn emit_kernel_for(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        comp: ComputationId,
        root: InstrId,
        leaves: HashMap<InstrId, Leaf>,
        out: &Loc,
    ) -> Result<(), JitError> {
        let instr = self.module.computation(comp).get(root);
        let vec = self.options.vectorize;
        let addrs: Vec<Addr> = out.leaves().iter().map(|b| b.addr).collect();
        match &instr.op {
            Op::Reduce { .. } => {
                let comp_ref = self.module.computation(comp);
                if let Some(cut) = reduce::reduce_split(self.module, comp_ref, root) {
                    return self.split_reduce(fb, arena, name, comp, root, leaves, out, cut);
                }
                let outs = addrs.clone();
                self.kernel(fb, arena, name, comp, leaves, &addrs, &mut |e| {
                    reduce::emit_reduce_part(e, root, &outs, vec, None)
                })
            }
            Op::ReduceWindow { .. } | Op::SelectAndScatter { .. } => {
                let o = addrs[0];
                let elements = instr.shape.as_array().map_or(0, |a| a.element_count());
                self.split_kernel(
                    fb,
                    arena,
                    name,
                    comp,
                    leaves,
                    &addrs,
                    elements,
                    &|e| window::window_split(e, root),
                    &mut |e, part| window::emit_window_part(e, root, o, vec, part),
                )
            }
            _ => {
                let shape = instr.shape.as_array().cloned().ok_or_else(|| {
                    JitError::Unsupported(format!(
                        "{} producing {}",
                        instr.op.opcode_name(),
                        instr.shape
                    ))
                })?;
                let outputs = [KernelOutput {
                    root,
                    addr: addrs[0],
                }];
                // A kernel reading a tiling select-and-scatter at its own index loops over the
                // select-and-scatter's windows (`window_tiled::emit_tiled_consumer_part`).
                let o = addrs[0];
                self.split_kernel(
                    fb,
                    arena,
                    name,
                    comp,
                    leaves,
                    &addrs,
                    shape.element_count(),
                    &|e| match window_tiled::tiled_consumer(e, root) {
                        Some(ss) => window::select_and_scatter_split(e, ss),
                        None => split_point(e, &outputs, &shape),
                    },
                    &mut |e, part| match window_tiled::tiled_consumer(e, root) {
                        Some(ss) => {
                            window_tiled::emit_tiled_consumer_part(e, ss, root, o, vec, part)
                        }
                        None => emit_elementwise_part(e, &outputs, &shape, vec, part),
                    },
                )
            }
        }
    }

    /// A fusion: its computation's parameters read the operands' buffers.
    /// A fusion into `out` (a fresh buffer, or a loop state buffer it may overwrite).
    fn emit_fusion(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        calls: ComputationId,
        args: &[Loc],
        out: Loc,
    ) -> Result<Loc, JitError> {
        let module = self.module;
        let comp = module.computation(calls);
        let leaves = fusion_leaves(comp, args).ok_or_else(|| {
            JitError::Unsupported(format!("{name}: a fusion parameter is not an array"))
        })?;
        let root = comp.root();
        let root_instr = comp.get(root);
        if let (Op::Tuple, Loc::Tuple(outs)) = (&root_instr.op, &out) {
            // Multi-output fusion: elementwise outputs of one shape share a loop nest.
            let elems: Vec<InstrId> = root_instr.operands().to_vec();
            if self.elementwise_with_reduce(fb, arena, name, calls, &leaves, &elems, outs)? {
                return Ok(out);
            }
            let mut shared: Vec<KernelOutput> = Vec::new();
            let first_shape = comp.get(elems[0]).shape.as_array().cloned();
            for (k, &el) in elems.iter().enumerate() {
                let el_instr = comp.get(el);
                let sub = &outs[k];
                let plain = !matches!(
                    el_instr.op,
                    Op::Reduce { .. }
                        | Op::ReduceWindow { .. }
                        | Op::SelectAndScatter { .. }
                        | Op::Tuple
                ) && !leaves.contains_key(&el)
                    && el_instr.shape.as_array().map(|a| a.dims.clone())
                        == first_shape.as_ref().map(|a| a.dims.clone());
                if plain {
                    shared.push(KernelOutput {
                        root: el,
                        addr: sub.as_array().expect("array").addr,
                    });
                } else {
                    self.emit_kernel_for(fb, arena, name, calls, el, leaves.clone(), sub)?;
                }
            }
            if !shared.is_empty() {
                let shape = first_shape.expect("array");
                self.elementwise_kernel(fb, arena, name, calls, leaves, &shared, &shape)?;
            }
            return Ok(out);
        }
        if leaves.contains_key(&root) {
            // The fusion returns one of its parameters unchanged.
            let src = leaves[&root].addr;
            let dst = out.as_array().expect("array").clone();
            self.copy_buffer(fb, arena, dst.addr, src, dst.byte_size());
            return Ok(out);
        }
        self.emit_kernel_for(fb, arena, name, calls, root, leaves, &out)?;
        Ok(out)
    }

    /// A multi-output fusion of elementwise outputs and one reduce of their dimensions that
    /// reduces the leading ones (`reduce_fused`): one loop nest stores the elementwise outputs
    /// and folds the reduce, in two parts when the reduce alone would be split
    /// (`reduce::reduce_split`), combined at the end. Returns false, emitting nothing, for any
    /// other fusion.
    #[allow(clippy::too_many_arguments)]
    fn elementwise_with_reduce(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        calls: ComputationId,
        leaves: &HashMap<InstrId, Leaf>,
        elems: &[InstrId],
        outs: &[Loc],
    ) -> Result<bool, JitError> {
        let comp = self.module.computation(calls);
        let reduces: Vec<usize> = (0..elems.len())
            .filter(|&k| matches!(comp.get(elems[k]).op, Op::Reduce { .. }))
            .collect();
        let [r] = reduces[..] else {
            return Ok(false);
        };
        let red = elems[r];
        let Some(dims) = comp.get(comp.get(red).operands()[0]).shape.as_array() else {
            return Ok(false);
        };
        let mut plain = Vec::new();
        for (k, &el) in elems.iter().enumerate() {
            if k == r {
                continue;
            }
            let same = comp
                .get(el)
                .shape
                .as_array()
                .is_some_and(|a| a.dims == dims.dims);
            if !same || leaves.contains_key(&el) || !comp.get(el).op.is_elementwise() {
                return Ok(false);
            }
            let Some(b) = outs.get(k).and_then(|l| l.as_array()) else {
                return Ok(false);
            };
            plain.push(KernelOutput {
                root: el,
                addr: b.addr,
            });
        }
        let Some(acc) = outs.get(r).and_then(|l| l.as_array()).cloned() else {
            return Ok(false);
        };
        if reduce_fused::leading_reduce(comp, red, &dims.dims).is_none() {
            return Ok(false);
        }
        let vec = self.options.vectorize;
        let cut = reduce::reduce_split(self.module, comp, red);
        // One part (or all) folding into `acc`: over the windows of a max-pool gradient read by
        // the single output (when its windows cut the first dimension as the reduce does),
        // else over the output's indices.
        let emit_part = |e: &mut Elemental, acc: Addr, part: Option<Part>| {
            let tiled = match &plain[..] {
                [one] => window_tiled::tiled_consumer(e, one.root)
                    .filter(|&ss| cut.is_none() || window::select_and_scatter_split(e, ss) == cut),
                _ => None,
            };
            match tiled {
                Some(ss) => reduce_fused::emit_tiled_consumer_reduce_part(
                    e,
                    ss,
                    plain[0].root,
                    plain[0].addr,
                    red,
                    acc,
                    vec,
                    part,
                ),
                None => reduce_fused::emit_elementwise_reduce_part(e, &plain, red, acc, vec, part),
            }
        };
        let mut addrs: Vec<Addr> = plain.iter().map(|o| o.addr).collect();
        let Some((mid, end)) = cut else {
            addrs.push(acc.addr);
            self.kernel(fb, arena, name, calls, leaves.clone(), &addrs, &mut |e| {
                emit_part(e, acc.addr, None)
            })?;
            return Ok(true);
        };
        let partial = self.alloc_scratch(acc.byte_size());
        let mut first_addrs = addrs.clone();
        first_addrs.push(acc.addr);
        let (first, fname) =
            self.build_kernel(name, calls, leaves.clone(), &first_addrs, &mut |e| {
                emit_part(e, acc.addr, Some((0, mid)))
            })?;
        addrs.push(partial);
        let (second, _) = self.build_kernel(name, calls, leaves.clone(), &addrs, &mut |e| {
            emit_part(e, partial, Some((mid, end)))
        })?;
        self.call_parts_and_combine(
            fb,
            arena,
            name,
            calls,
            red,
            [first, second],
            &[acc.addr],
            &[partial],
        )?;
        if let Some(p) = &mut self.profile {
            let slot = p.add_slot(&fname, self.current_op);
            self.profile_mark(fb, slot);
        }
        self.free_scratch(vec![partial]);
        Ok(true)
    }

    /// Runs the two parts of a split reduce (on two workers when the GEMM may use two
    /// threads, else one after the other), then a kernel combining `partials` into `outputs`.
    #[allow(clippy::too_many_arguments)]
    fn call_parts_and_combine(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        name: &str,
        comp: ComputationId,
        red: InstrId,
        [first, second]: [cranelift_module::FuncId; 2],
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

    fn addr_value(&self, fb: &mut FunctionBuilder, arena: Value, a: Addr) -> Value {
        match a {
            Addr::Arena(off) => fb.ins().iadd_imm_s(arena, off as i64),
            Addr::Absolute(p) => fb.ins().iconst(types::I64, p as i64),
        }
    }

    fn copy_buffer(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        dst: Addr,
        src: Addr,
        bytes: usize,
    ) {
        if dst == src || bytes == 0 {
            return;
        }
        let d = self.addr_value(fb, arena, dst);
        let s = self.addr_value(fb, arena, src);
        let n = fb.ins().iconst(types::I64, bytes as i64);
        let config = self.isa.frontend_config();
        fb.call_memcpy(config, d, s, n);
    }

    /// Copies every array of `src` into the same position of `dst`, through temporaries when
    /// a source buffer is also a different destination (a permutation of the loop state).
    fn copy_loc(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        dst: &Loc,
        src: &Loc,
    ) -> Result<(), JitError> {
        let d: Vec<Buffer> = dst.leaves().into_iter().cloned().collect();
        let s: Vec<Buffer> = src.leaves().into_iter().cloned().collect();
        if d.len() != s.len() {
            return Err(JitError::Invalid(
                "loop state and body result differ in shape".into(),
            ));
        }
        let dst_addrs: Vec<Addr> = d.iter().map(|b| b.addr).collect();
        let mut srcs: Vec<Addr> = Vec::with_capacity(s.len());
        let mut temps = Vec::new();
        for (i, b) in s.iter().enumerate() {
            if b.addr != d[i].addr && dst_addrs.contains(&b.addr) {
                let tmp = self.alloc(b.byte_size());
                self.copy_buffer(fb, arena, tmp, b.addr, b.byte_size());
                srcs.push(tmp);
                temps.push(tmp);
            } else {
                srcs.push(b.addr);
            }
        }
        for (i, b) in d.iter().enumerate() {
            self.copy_buffer(fb, arena, b.addr, srcs[i], b.byte_size());
        }
        self.free_scratch(temps);
        Ok(())
    }

    fn load_scalar_i64(
        &self,
        fb: &mut FunctionBuilder,
        arena: Value,
        b: &Buffer,
    ) -> Result<Value, JitError> {
        let a = self.addr_value(fb, arena, b.addr);
        let ty = super::types::scalar_type(b.shape.element_type)?;
        let v = fb.ins().load(ty, MemFlagsData::new().with_notrap(), a, 0);
        Ok(super::elementwise::int_to_i64(fb, v, b.shape.element_type))
    }

    fn emit_while(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        shape: &Shape,
        init: Loc,
        cond: ComputationId,
        body: ComputationId,
    ) -> Result<Loc, JitError> {
        let state = self.alloc_loc(shape)?;
        // Held for the caller; the loop's temporaries never reuse it.
        self.retain(&state);
        self.copy_loc(fb, arena, &state, &init)?;
        let header = fb.create_block();
        let body_block = fb.create_block();
        let exit = fb.create_block();
        fb.ins().jump(header, &[]);
        fb.switch_to_block(header);
        let c = self.emit_computation(fb, arena, cond, std::slice::from_ref(&state), None)?;
        let cb = c
            .as_array()
            .cloned()
            .ok_or_else(|| JitError::Invalid("while condition is not a pred".into()))?;
        let p = self.load_scalar_i64(fb, arena, &cb)?;
        self.release(&c);
        fb.ins().brif(p, body_block, &[], exit, &[]);
        fb.switch_to_block(body_block);
        fb.seal_block(body_block);
        let r =
            self.emit_computation(fb, arena, body, std::slice::from_ref(&state), Some(&state))?;
        self.copy_loc(fb, arena, &state, &r)?;
        self.release(&r);
        fb.ins().jump(header, &[]);
        fb.seal_block(header);
        fb.switch_to_block(exit);
        fb.seal_block(exit);
        Ok(state)
    }

    fn emit_conditional(
        &mut self,
        fb: &mut FunctionBuilder,
        arena: Value,
        shape: &Shape,
        args: &[Loc],
        branches: &[ComputationId],
    ) -> Result<Loc, JitError> {
        let result = self.alloc_loc(shape)?;
        self.retain(&result);
        let sel = args[0]
            .as_array()
            .cloned()
            .ok_or_else(|| JitError::Invalid("conditional selector is not an array".into()))?;
        let idx = self.load_scalar_i64(fb, arena, &sel)?;
        let n = branches.len() as i64;
        // pred: true runs branch 0; an index out of range runs the last branch.
        let idx = if sel.shape.element_type == tessel_compiler::ir::ElementType::Pred {
            let one = fb.ins().iconst(types::I64, 1);
            fb.ins().isub(one, idx)
        } else {
            let bad_lo = fb.ins().icmp_imm_s(IntCC::SignedLessThan, idx, 0);
            let bad_hi = fb.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, idx, n);
            let bad = fb.ins().bor(bad_lo, bad_hi);
            let last = fb.ins().iconst(types::I64, n - 1);
            fb.ins().select(bad, last, idx)
        };
        let merge = fb.create_block();
        let blocks: Vec<_> = branches.iter().map(|_| fb.create_block()).collect();
        for (k, &b) in blocks.iter().enumerate() {
            if k + 1 == blocks.len() {
                fb.ins().jump(b, &[]);
            } else {
                let next = fb.create_block();
                let is_k = fb.ins().icmp_imm_s(IntCC::Equal, idx, k as i64);
                fb.ins().brif(is_k, b, &[], next, &[]);
                fb.seal_block(next);
                fb.switch_to_block(next);
            }
        }
        for (k, &b) in blocks.iter().enumerate() {
            fb.seal_block(b);
            fb.switch_to_block(b);
            let arg = args
                .get(k + 1)
                .cloned()
                .ok_or_else(|| JitError::Invalid("conditional branch without operand".into()))?;
            let r = self.emit_computation(fb, arena, branches[k], &[arg], None)?;
            self.copy_loc(fb, arena, &result, &r)?;
            self.release(&r);
            fb.ins().jump(merge, &[]);
        }
        fb.seal_block(merge);
        fb.switch_to_block(merge);
        Ok(result)
    }
}

/// A fusion's parameters as kernel leaves reading its operands' buffers (`None` when an
/// operand is not an array).
fn fusion_leaves(comp: &Computation, args: &[Loc]) -> Option<HashMap<InstrId, Leaf>> {
    let mut leaves = HashMap::new();
    for p in comp.parameters() {
        let Op::Parameter(n) = comp.get(p).op else {
            continue;
        };
        let b = args.get(n as usize)?.as_array()?;
        leaves.insert(
            p,
            Leaf {
                addr: b.addr,
                shape: b.shape.clone(),
            },
        );
    }
    Some(leaves)
}

/// The locations of the values whose last reader is the instruction at `pos`.
fn dying_locs<'l>(
    dying: &HashMap<usize, Vec<InstrId>>,
    pos: usize,
    locs: &'l HashMap<InstrId, Loc>,
) -> Vec<&'l Loc> {
    dying
        .get(&pos)
        .into_iter()
        .flatten()
        .filter_map(|d| locs.get(d))
        .collect()
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
