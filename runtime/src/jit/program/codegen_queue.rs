//! Cranelift's code generation on helper threads, while the emitter builds the next
//! functions.
//!
//! A module's program is hundreds of small functions (ResNet-20's training loop: about 500).
//! Emitting their CLIF is sequential: it walks the module and hands out arena offsets. Turning
//! each function into machine code (optimizer, lowering, register allocation) depends on that
//! function alone, so [`CodegenQueue`] takes the finished functions and helper threads
//! compile them as they come. When emission ends, the emitting thread compiles what is left
//! beside them. The machine code is then defined in the order the functions were submitted, so
//! the executable is the same, byte for byte, whatever the number of helpers.

use super::super::JitError;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::Context;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module as _, ModuleReloc};
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// A function waiting for its machine code.
struct Pending {
    index: usize,
    id: FuncId,
    func: Function,
    what: String,
}

/// A function's machine code, ready for `define_function_bytes`.
struct MachineCode {
    id: FuncId,
    what: String,
    alignment: u64,
    bytes: Vec<u8>,
    relocs: Vec<ModuleReloc>,
}

#[derive(Default)]
struct QueueState {
    waiting: VecDeque<Pending>,
    /// No more functions will come: helpers stop once `waiting` is empty.
    closed: bool,
    submitted: usize,
    /// By submission index.
    done: Vec<(usize, Result<MachineCode, JitError>)>,
}

/// Functions handed over for code generation, and their machine code.
pub(super) struct CodegenQueue {
    isa: OwnedTargetIsa,
    state: Mutex<QueueState>,
    /// Signalled when a function is submitted, the queue closes, or a function is done.
    changed: Condvar,
}

impl CodegenQueue {
    pub(super) fn new(isa: OwnedTargetIsa) -> CodegenQueue {
        CodegenQueue {
            isa,
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A panic while holding the lock leaves only plain data behind; carry on with it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `func` (the body of `id`; `what` names it in errors) over for code generation.
    pub(super) fn submit(&self, id: FuncId, func: Function, what: &str) {
        let mut state = self.lock();
        let index = state.submitted;
        state.submitted += 1;
        state.waiting.push_back(Pending {
            index,
            id,
            func,
            what: what.to_owned(),
        });
        drop(state);
        self.changed.notify_one();
    }

    /// No more functions will be submitted: helpers return once the queue is empty.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// A helper's loop: compiles waiting functions until the queue is closed and empty.
    pub(super) fn work(&self) {
        let mut state = self.lock();
        loop {
            if let Some(pending) = state.waiting.pop_front() {
                drop(state);
                let index = pending.index;
                let code = self.generate(pending);
                state = self.lock();
                state.done.push((index, code));
                self.changed.notify_all();
            } else if state.closed {
                return;
            } else {
                state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    /// Closes the queue, compiles what is left beside the helpers, waits for theirs, and
    /// defines every function in `jit` in submission order. The first error (in that order)
    /// is returned.
    pub(super) fn finish(&self, jit: &mut JITModule) -> Result<(), JitError> {
        self.close();
        self.work();
        let mut state = self.lock();
        while state.done.len() < state.submitted {
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        let mut done = std::mem::take(&mut state.done);
        state.submitted = 0;
        drop(state);
        done.sort_unstable_by_key(|(index, _)| *index);
        for (_, code) in done {
            let code = code?;
            jit.define_function_bytes(code.id, code.alignment, &code.bytes, &code.relocs)
                .map_err(|e| JitError::Codegen(format!("{}: {e:?}", code.what)))?;
        }
        Ok(())
    }

    /// Cranelift's code generation for one function, as `JITModule::define_function` does it.
    /// A panic in Cranelift becomes an error: on a helper thread it would otherwise leave
    /// [`CodegenQueue::finish`] waiting for a function that never comes.
    fn generate(&self, pending: Pending) -> Result<MachineCode, JitError> {
        let what = pending.what.clone();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.generate_unguarded(pending)
        }))
        .unwrap_or_else(|_| {
            Err(JitError::Codegen(format!(
                "{what}: Cranelift's code generation panicked"
            )))
        })
    }

    fn generate_unguarded(&self, pending: Pending) -> Result<MachineCode, JitError> {
        let Pending { id, func, what, .. } = pending;
        let mut ctx = Context::for_function(func);
        let alignment = match ctx.compile(&*self.isa, &mut ControlPlane::default()) {
            Ok(code) => code.buffer.alignment as u64,
            Err(e) => return Err(JitError::Codegen(format!("{what}: {:?}", e.inner))),
        };
        let code = ctx
            .compiled_code()
            .ok_or_else(|| JitError::Codegen(format!("{what}: no machine code")))?;
        let relocs = code
            .buffer
            .relocs()
            .iter()
            .map(|reloc| ModuleReloc::from_mach_reloc(reloc, &ctx.func, id))
            .collect();
        Ok(MachineCode {
            id,
            what,
            alignment,
            bytes: code.code_buffer().to_vec(),
            relocs,
        })
    }
}

/// Closes the queue when dropped, dropping what still waits, so helpers return even when
/// emission stops early (an error, or a panic unwinding through the thread scope that waits
/// for them). After [`CodegenQueue::finish`] nothing waits and this only closes again.
pub(super) struct CloseOnDrop<'q>(pub &'q CodegenQueue);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.lock().waiting.clear();
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::isa::host_isa;
    use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Signature, UserFuncName};
    use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
    use cranelift_jit::JITBuilder;
    use cranelift_module::{default_libcall_names, Linkage};

    /// `f(x) = x * k + k` as a Cranelift function named `id`.
    fn scale(jit: &mut JITModule, k: i64) -> (FuncId, Function) {
        let frontend = jit.isa().frontend_config();
        let mut sig = Signature::new(jit.isa().default_call_conv());
        sig.params.push(AbiParam::new(types::I64));
        sig.returns.push(AbiParam::new(types::I64));
        let id = jit
            .declare_function(&format!("scale{k}"), Linkage::Local, &sig)
            .unwrap();
        let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
        let mut fbc = FunctionBuilderContext::new();
        let mut fb = FunctionBuilder::new(&mut func, &mut fbc);
        let block = fb.create_block();
        fb.append_block_params_for_function_params(block);
        fb.switch_to_block(block);
        fb.seal_block(block);
        let x = fb.block_params(block)[0];
        let product = fb.ins().imul_imm_s(x, k);
        let sum = fb.ins().iadd_imm_s(product, k);
        fb.ins().return_(&[sum]);
        fb.finalize(frontend);
        (id, func)
    }

    /// Compiles 40 functions with `helpers` helper threads and returns what each computes
    /// for 3, with the address of its code.
    fn run(helpers: usize) -> Vec<(i64, usize)> {
        let (isa, _) = host_isa("speed").unwrap();
        let mut jit = JITModule::new(JITBuilder::with_isa(isa.clone(), default_libcall_names()));
        let queue = CodegenQueue::new(isa);
        let ids = std::thread::scope(|scope| {
            let _close = CloseOnDrop(&queue);
            for _ in 0..helpers {
                scope.spawn(|| queue.work());
            }
            let mut ids = Vec::new();
            for k in 1..=40 {
                let (id, func) = scale(&mut jit, k);
                queue.submit(id, func, &format!("scale{k}"));
                ids.push(id);
            }
            queue.finish(&mut jit).unwrap();
            ids
        });
        jit.finalize_definitions().unwrap();
        let values = ids
            .iter()
            .map(|&id| {
                let code = jit.get_finalized_function(id);
                // SAFETY: `scale` built this function as `fn(i64) -> i64`, with the host's
                // default calling convention.
                let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
                (
                    f(3),
                    code as usize - jit.get_finalized_function(ids[0]) as usize,
                )
            })
            .collect();
        // SAFETY: none of the functions is called after this.
        unsafe { jit.free_memory() };
        values
    }

    #[test]
    fn helpers_compile_every_function_and_the_layout_does_not_depend_on_them() {
        let alone = run(0);
        for (k, (value, _)) in (1..=40).zip(&alone) {
            assert_eq!(*value, 3 * k + k);
        }
        // Functions are defined in submission order: each at the same offset from the first.
        assert_eq!(run(1), alone);
        assert_eq!(run(3), alone);
    }

    #[test]
    fn an_unfinished_queue_lets_its_helpers_return() {
        let (isa, _) = host_isa("speed").unwrap();
        let mut jit = JITModule::new(JITBuilder::with_isa(isa.clone(), default_libcall_names()));
        let queue = CodegenQueue::new(isa);
        // Emission stopping early (an error): the scope ends without `finish`, and must not
        // wait forever for its helpers.
        std::thread::scope(|scope| {
            let _close = CloseOnDrop(&queue);
            for _ in 0..2 {
                scope.spawn(|| queue.work());
            }
            let (id, func) = scale(&mut jit, 2);
            queue.submit(id, func, "scale2");
        });
        assert!(queue.lock().waiting.is_empty());
    }
}
