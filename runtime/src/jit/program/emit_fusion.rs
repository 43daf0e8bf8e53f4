//! Kernels for one instruction: a fusion (its parameters read the operands' buffers; a
//! multi-output fusion shares loop nests between outputs of one shape, or folds a reduce into
//! its elementwise outputs' nest), or any other op rooted at this instruction (elementwise,
//! reduce, reduce-window, select-and-scatter).

use super::compile::ProgramCx;
use super::emit_kernels::{ops_per_element, Part};
use crate::jit::buffer::{Addr, Loc};
use crate::jit::clif::value_at_index::{Elemental, Leaf};
use crate::jit::fused_kernels::elementwise::{chunking, emit_elementwise_part, KernelOutput};
use crate::jit::fused_kernels::{reduce, reduce_fused, window, window_tiled};
use crate::jit::JitError;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use cranelift_module::Module as _;
use std::collections::HashMap;
use tessel_compiler::ir::{Computation, ComputationId, InstrId, Op};

impl ProgramCx<'_> {
    /// One kernel computing instruction `root` of `comp` into `out`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_kernel_for(
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
        if out.leaves().iter().all(|b| b.shape.element_count() == 0) {
            // Nothing to compute (and the loop nests would divide by the zero extents).
            return Ok(());
        }
        let vec = self.options.vectorize;
        let addrs: Vec<Addr> = out.leaves().iter().map(|b| b.addr).collect();
        match &instr.op {
            Op::Reduce { .. } => {
                let comp_ref = self.module.computation(comp);
                if let Some(cut) = reduce::reduce_split(self.module, comp_ref, root) {
                    return self.split_reduce(fb, arena, name, comp, root, leaves, out, cut);
                }
                let outs = addrs.clone();
                if let Some(rows) = reduce::kept_first_dimension(comp_ref, root) {
                    // Each thread reduces whole rows of the kept first dimension.
                    let operand = &comp_ref.get(instr.operands()[0]).shape;
                    let elements = operand.as_array().map_or(0, |a| a.element_count());
                    let ops = ops_per_element(comp_ref, &[root], &leaves);
                    return self.split_kernel(
                        fb,
                        arena,
                        name,
                        comp,
                        leaves,
                        &addrs,
                        elements.saturating_mul(ops),
                        &|_| Some((rows, 1)),
                        &mut |e, part| reduce::emit_reduce_part(e, root, &outs, vec, part),
                    );
                }
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
                    &|e| window::window_split(e, root).map(|(_, end)| (end, 1)),
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
                let ops = ops_per_element(self.module.computation(comp), &[root], &leaves);
                self.split_kernel(
                    fb,
                    arena,
                    name,
                    comp,
                    leaves,
                    &addrs,
                    shape.element_count().saturating_mul(ops),
                    &|e| match window_tiled::tiled_consumer(e, root) {
                        Some(ss) => {
                            window::select_and_scatter_split(e, ss).map(|(_, end)| (end, 1))
                        }
                        None => chunking(e, &outputs, &shape),
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
    pub(super) fn emit_fusion(
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
        if self.emit_pool_fusion(fb, arena, name, calls, args, &out)? {
            return Ok(out);
        }
        self.check_not_discarded()?;
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
            if !shared.is_empty() && first_shape.as_ref().is_some_and(|a| a.element_count() > 0) {
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

    /// A multi-output fusion of elementwise outputs and reduces of their dimensions that
    /// reduce the same leading ones (`reduce_fused`): one loop nest stores the elementwise
    /// outputs and folds every reduce, in two parts when the reduces alone would be split
    /// (`reduce::reduce_split`, the same cut for each), combined at the end. Returns false,
    /// emitting nothing, for any other fusion.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn elementwise_with_reduce(
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
        let Some(&r0) = reduces.first() else {
            return Ok(false);
        };
        let Some(dims) = comp.get(comp.get(elems[r0]).operands()[0]).shape.as_array() else {
            return Ok(false);
        };
        if dims.element_count() == 0 {
            // Each output alone: the empty ones need no code, the reduce gives its init.
            return Ok(false);
        }
        let mut plain = Vec::new();
        for (k, &el) in elems.iter().enumerate() {
            if reduces.contains(&k) {
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
        let cut = reduce::reduce_split(self.module, comp, elems[r0]);
        let leading = reduce_fused::leading_reduce(comp, elems[r0], &dims.dims);
        let mut reds = Vec::with_capacity(reduces.len());
        for &r in &reduces {
            let red = elems[r];
            let Some(acc) = outs.get(r).and_then(|l| l.as_array()).cloned() else {
                return Ok(false);
            };
            if leading.is_none()
                || reduce_fused::leading_reduce(comp, red, &dims.dims) != leading
                || reduce::reduce_split(self.module, comp, red) != cut
            {
                return Ok(false);
            }
            reds.push((red, acc));
        }
        let vec = self.options.vectorize;
        // One part (or all) folding into `accs`: over the windows of a max-pool gradient read
        // by the single output when there is one reduce (and its windows cut the first
        // dimension as the reduce does), else over the outputs' indices.
        let one_reduce = reds.len() == 1;
        let emit_part = |e: &mut Elemental, accs: &[(InstrId, Addr)], part: Option<Part>| {
            let tiled = match &plain[..] {
                [one] if one_reduce => window_tiled::tiled_consumer(e, one.root)
                    .filter(|&ss| cut.is_none() || window::select_and_scatter_split(e, ss) == cut),
                _ => None,
            };
            match tiled {
                Some(ss) => reduce_fused::emit_tiled_consumer_reduce_part(
                    e,
                    ss,
                    plain[0].root,
                    plain[0].addr,
                    accs[0].0,
                    accs[0].1,
                    vec,
                    part,
                ),
                None => reduce_fused::emit_elementwise_reduce_part(e, &plain, accs, vec, part),
            }
        };
        let mut addrs: Vec<Addr> = plain.iter().map(|o| o.addr).collect();
        let whole: Vec<(InstrId, Addr)> = reds.iter().map(|(r, b)| (*r, b.addr)).collect();
        let Some((mid, end)) = cut else {
            addrs.extend(whole.iter().map(|w| w.1));
            self.kernel(fb, arena, name, calls, leaves.clone(), &addrs, &mut |e| {
                emit_part(e, &whole, None)
            })?;
            return Ok(true);
        };
        let mut partials = Vec::with_capacity(reds.len());
        for (red, acc) in &reds {
            partials.push((*red, self.take_partial_scratch(acc.byte_size())?));
        }
        let mut first_addrs = addrs.clone();
        first_addrs.extend(whole.iter().map(|w| w.1));
        let (first, fname) =
            self.build_kernel(name, calls, leaves.clone(), &first_addrs, &mut |e| {
                emit_part(e, &whole, Some((0, mid)))
            })?;
        addrs.extend(partials.iter().map(|p| p.1));
        let (second, _) = self.build_kernel(name, calls, leaves.clone(), &addrs, &mut |e| {
            emit_part(e, &partials, Some((mid, end)))
        })?;
        self.call_parts_and_combine(
            fb,
            arena,
            name,
            calls,
            whole[0].0,
            [first, second],
            &[whole[0].1],
            &[partials[0].1],
        )?;
        // The other reduces' parts are combined after the parts have run.
        for (w, p) in whole.iter().zip(&partials).skip(1) {
            let both = [w.1, p.1];
            let (combine, _) = self.build_kernel(name, calls, HashMap::new(), &both, &mut |e| {
                reduce::emit_reduce_combine(e, w.0, &[w.1], &[p.1], vec)
            })?;
            let f = self.jit.declare_func_in_func(combine, fb.func);
            fb.ins().call(f, &[arena]);
        }
        if let Some(p) = &mut self.profile {
            let slot = p.add_slot(&fname, self.current_op);
            self.profile_mark(fb, slot);
        }
        Ok(true)
    }
}

/// A fusion's parameters as kernel leaves reading its operands' buffers (`None` when an
/// operand is not an array).
pub(super) fn fusion_leaves(comp: &Computation, args: &[Loc]) -> Option<HashMap<InstrId, Leaf>> {
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
