//! The entry of the JIT: the state while lowering one module ([`ProgramCx`]) and
//! [`compile_module`], which builds the program function `tessel_program(arena) -> status`,
//! hands every function to Cranelift's code generation (dumping its CLIF when asked; helper
//! threads compile them meanwhile, `codegen_queue.rs`) and the code over to an
//! [`Executable`].

use super::codegen_queue::{CloseOnDrop, CodegenQueue};
use super::executable::{Executable, ExecutableParts, ProgramStats};
use crate::jit::arena_plan::plan_arena;
use crate::jit::buffer::Addr;
use crate::jit::buffer::Loc;
use crate::jit::clif::symbols::Symbols;
use crate::jit::host::profile::{ProfileCounters, PROGRAM_END, RESTART};
use crate::jit::isa::host_isa;
use crate::jit::routines::conv_pair::PairCache;
use crate::jit::{JitError, JitOptions};
use cranelift_codegen::ir::{types, AbiParam, Function, InstBuilder, Signature, UserFuncName};
use cranelift_codegen::ir::{Block, SigRef};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module as _};
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;
use tessel_compiler::ir::{InstrId, Module};
use tessel_compiler::passes::{BufferAssignment, Instance};
use tessel_kernels::cpu::CpuFeatures;

/// State while lowering one module.
pub(super) struct ProgramCx<'m> {
    pub module: &'m Module,
    pub options: &'m JitOptions,
    pub isa: OwnedTargetIsa,
    pub features: CpuFeatures,
    pub jit: JITModule,
    /// Where finished functions go for their machine code.
    pub codegen: &'m CodegenQueue,
    pub call_conv: CallConv,
    /// The buffer assignment every arena offset comes from (`arena_plan.rs`).
    pub plan: BufferAssignment,
    /// The next computation instance to emit (numbered as the assignment numbers them).
    pub next_instance: Instance,
    /// The instruction being emitted.
    pub current: (Instance, InstrId),
    /// Its planned scratch buffers not handed out yet, the next one last.
    pub scratch: Vec<Addr>,
    /// Every scratch request: the instruction's name and the bytes asked for.
    pub scratch_log: Vec<(String, usize)>,
    /// The arena offsets of every value the program placed, by instruction instance.
    pub placements: Vec<((Instance, InstrId), Vec<usize>)>,
    /// Constants, plans, counters and Rust functions the code refers to by symbol.
    pub symbols: Symbols,
    pub plans: Vec<Box<dyn Any + Send + Sync>>,
    pub kernels: usize,
    pub routine_sig: Option<SigRef>,
    pub error_block: Option<Block>,
    pub dump_index: usize,
    /// Per-kernel time counters, when `JitOptions::profile` is on.
    pub profile: Option<Box<ProfileCounters>>,
    pub mark_sig: Option<SigRef>,
    /// The opcode of the instruction being lowered (names profile slots).
    pub current_op: &'static str,
    /// The name of the instruction being lowered.
    pub current_name: String,
    /// The module, shared by the collective routines' plans (made on first use).
    pub shared_module: Option<Arc<Module>>,
    /// Bias-add fusions a convolution routine computes in its stores (`conv_bias.rs`): they
    /// emit no code.
    pub folded_bias_adds: HashSet<(Instance, InstrId)>,
    /// Pool fusions a convolution routine computes in its epilogue (`conv_pool.rs`): they
    /// emit no code.
    pub folded_pools: HashSet<(Instance, InstrId)>,
    /// Forward pool fusions emitted writing their window choices (`pool_choices.rs`): only
    /// these choices are handed to a gradient.
    pub choices_written: HashSet<(Instance, InstrId)>,
    /// Pool gradients emitted reading window choices.
    pub choices_read: usize,
    /// Values a convolution with a folded pool may leave unstored (`conv_pool.rs`,
    /// `PoolTargets::discard_output`): only the pool and a gradient reading its choices read
    /// them, and emitting anything else that reads one is an error.
    pub discarded: HashSet<(Instance, InstrId)>,
    /// The values of convolutions planned beside an earlier one (`conv_pair.rs`), until
    /// their own turn names them.
    pub paired_values: HashMap<(Instance, InstrId), Loc>,
    /// Convolution pairs run side by side.
    pub paired_convolutions: usize,
    /// Kernels run in chunks on several threads.
    pub chunked_kernels: usize,
    /// Which convolutions are paired (`routines/conv_pair.rs`), worked out once per
    /// computation.
    pub conv_pairs: PairCache,
}

/// Compiles `module` (see [`crate::jit::compile`]).
pub(crate) fn compile_module(
    module: &Module,
    options: &JitOptions,
    plan: Option<BufferAssignment>,
) -> Result<Executable, JitError> {
    let start = Instant::now();
    crate::jit::fused_kernels::window::check_window_sizes(module)?;
    let (isa, features) = host_isa(&options.opt_level)?;
    let codegen = CodegenQueue::new(isa.clone());
    // The thread budget of the routines is the compile's too.
    let helpers = options.gemm_threads.saturating_sub(1);
    std::thread::scope(|scope| {
        let _close = CloseOnDrop(&codegen);
        for _ in 0..helpers {
            scope.spawn(|| codegen.work());
        }
        let plan = plan.unwrap_or_else(|| plan_arena(module, options));
        emit_program(module, options, plan, isa, features, &codegen, start)
    })
}

/// Emits the program and its functions, with `codegen` turning them into machine code.
fn emit_program(
    module: &Module,
    options: &JitOptions,
    plan: BufferAssignment,
    isa: OwnedTargetIsa,
    features: CpuFeatures,
    codegen: &CodegenQueue,
    start: Instant,
) -> Result<Executable, JitError> {
    let symbols = Symbols::default();
    let mut builder = JITBuilder::with_isa(isa.clone(), default_libcall_names());
    builder.symbol_lookup_fn(symbols.lookup_fn());
    let jit = JITModule::new(builder);
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
        codegen,
        call_conv,
        plan,
        next_instance: 0,
        current: (0, InstrId::new(0)),
        scratch: Vec::new(),
        scratch_log: Vec::new(),
        placements: Vec::new(),
        symbols,
        plans: Vec::new(),
        kernels: 0,
        routine_sig: None,
        error_block: None,
        dump_index: 0,
        profile: match options.trace {
            Some(t) => Some(Box::new(ProfileCounters::with_trace(t.replicas, t.options))),
            None => options.profile.then(Box::default),
        },
        mark_sig: None,
        current_op: "",
        current_name: String::new(),
        shared_module: None,
        folded_bias_adds: HashSet::new(),
        folded_pools: HashSet::new(),
        choices_written: HashSet::new(),
        choices_read: 0,
        discarded: HashSet::new(),
        paired_values: HashMap::new(),
        paired_convolutions: 0,
        chunked_kernels: 0,
        conv_pairs: PairCache::default(),
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
    let mut params: Vec<Loc> = Vec::new();
    for p in entry.parameters() {
        // Instance 0 is the entry's emission.
        cx.begin_instruction(0, p);
        params.push(cx.alloc_loc(&entry.get(p).shape)?);
    }
    let result = cx.emit_computation(&mut fb, arena, module.entry, &params)?;
    cx.profile_mark(&mut fb, PROGRAM_END);
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
    codegen.finish(&mut cx.jit)?;
    cx.jit
        .finalize_definitions()
        .map_err(|e| JitError::Codegen(e.to_string()))?;
    let entry_ptr = cx.jit.get_finalized_function(entry_id);
    let arena_size = cx.plan.peak_bytes.max(0) as usize;
    let stats = ProgramStats {
        kernels: cx.kernels,
        arena_bytes: arena_size,
        buffers: cx.plan.buffers.len(),
        constant_bytes: cx.symbols.constant_bytes(),
        compile_ms: start.elapsed().as_secs_f64() * 1e3,
        scratch: std::mem::take(&mut cx.scratch_log),
        placements: std::mem::take(&mut cx.placements),
        folded_pools: cx.folded_pools.len(),
        pool_choices: cx.choices_read,
        discarded_outputs: cx.discarded.len(),
        paired_convolutions: cx.paired_convolutions,
        chunked_kernels: cx.chunked_kernels,
    };
    Ok(Executable::new(ExecutableParts {
        jit: cx.jit,
        entry: entry_ptr,
        arena_size,
        params,
        result,
        consts: cx.symbols.into_consts(),
        plans: cx.plans,
        profile: cx.profile,
        stats,
    }))
}

impl ProgramCx<'_> {
    /// Hands a function over for its machine code (defined in the module by
    /// [`CodegenQueue::finish`]), dumping its CLIF when asked.
    pub(super) fn define(
        &mut self,
        id: FuncId,
        func: Function,
        what: &str,
    ) -> Result<(), JitError> {
        // The symbols this function refers to must be declared before it is defined.
        self.symbols.declare(&mut self.jit)?;
        if let Some(dir) = &self.options.dump_to {
            let n = self.dump_index;
            self.dump_index += 1;
            let before = dir.join(format!("{n:04}.{what}.before_opt.clif"));
            std::fs::write(&before, func.display().to_string())
                .map_err(|e| JitError::Io(format!("{}: {e}", before.display())))?;
            let mut opt = Context::for_function(func.clone());
            opt.optimize(&*self.isa, &mut Default::default())
                .map_err(|e| JitError::Codegen(format!("{what}: {e:?}")))?;
            let after = dir.join(format!("{n:04}.{what}.after_opt.clif"));
            std::fs::write(&after, opt.func.display().to_string())
                .map_err(|e| JitError::Io(format!("{}: {e}", after.display())))?;
        }
        self.codegen.submit(id, func, what);
        Ok(())
    }
}
