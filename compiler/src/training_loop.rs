//! Compiled training loops: wraps a train step in one `while` of K iterations.
//!
//! The step's entry parameters split into *fed* ones (named by the caller, read from the
//! infeed queue once per iteration) and *carried* ones (loop state, kept in place). The step's
//! first outputs are the new values of the carried parameters in parameter order; any further
//! outputs are per-iteration values, sent to the outfeed queue every iteration (the host
//! stacks them on a leading axis of size K).
//!
//! The result module's entry takes the carried parameters only (in their original order) and
//! returns their final values as a tuple. Its shape:
//!
//! ```text
//! body(state = (s32[] i, token[] t, carried...)):
//!   ((fed...), t1) = infeed(t)
//!   out = call(step, params in the step's order)
//!   t2 = outfeed((out[C..]...), t1)
//!   (i + 1, t2, out[0..C]...)
//! condition(state): i < K
//! entry(carried...): while((0, after-all(), carried...)), backend_config={"known_trip_count":{"n":"K"}}
//! ```
//!
//! The token is part of the loop state so that the infeed and outfeed are ordered (iteration
//! i+1 reads only after iteration i wrote) and are reachable from the root like any value.

use crate::builder::Builder;
use crate::ir::{
    Array, BinaryOp, ComparisonDirection, Computation, ElementType, InstrId, Literal, Module, Op,
    Shape,
};
use crate::shape_inference::ShapeError;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum LoopError {
    #[error("a training loop needs at least one iteration")]
    NoIterations,
    #[error("{iterations} iterations do not fit the s32 loop counter")]
    TooManyIterations { iterations: u64 },
    #[error("the infeed names parameter {index}, but the step has {count} parameters")]
    NoSuchParameter { index: u32, count: usize },
    #[error("the infeed names parameter {index} twice")]
    Repeated { index: u32 },
    #[error("parameter {index} ({name}) has shape {shape}; loop-carried and fed parameters must be arrays")]
    NotAnArray {
        index: usize,
        name: String,
        shape: String,
    },
    #[error("the step has {carried} carried parameters but returns only {outputs} outputs; its first outputs must be the carried parameters' new values")]
    TooFewOutputs { carried: usize, outputs: usize },
    #[error("output {output} is {got}, but it is the new value of carried parameter {index} ({name}), which is {want}")]
    CarriedMismatch {
        output: usize,
        index: usize,
        name: String,
        want: String,
        got: String,
    },
    #[error("per-iteration output {output} is {shape}; only arrays can be sent to the outfeed")]
    OutputNotAnArray { output: usize, shape: String },
    #[error("the step already uses {opcode} ({name}); it cannot be wrapped in a fed loop")]
    AlreadyFeeds { opcode: String, name: String },
    #[error("building the loop: {0}")]
    Build(#[from] ShapeError),
}

/// How a wrapped step's parameters and outputs are laid out (for the host side).
#[derive(Clone, Debug, PartialEq)]
pub struct LoopSignature {
    pub iterations: u64,
    /// Step parameter numbers of the carried state, increasing (the new entry's parameters).
    pub carried: Vec<u32>,
    /// Step parameter numbers read from the infeed, in the order the infeed tuple holds them
    /// (increasing).
    pub fed: Vec<u32>,
    /// Number of per-iteration outputs sent to the outfeed each iteration.
    pub per_iteration_outputs: usize,
}

/// Splits the step's parameters and checks its outputs against the loop contract.
pub fn loop_signature(
    step: &Module,
    iterations: u64,
    infeed_params: &[u32],
) -> Result<LoopSignature, LoopError> {
    if iterations == 0 {
        return Err(LoopError::NoIterations);
    }
    if iterations > i32::MAX as u64 {
        return Err(LoopError::TooManyIterations { iterations });
    }
    let entry = step.entry();
    let params = entry.parameters();
    let mut fed: Vec<u32> = Vec::new();
    for &i in infeed_params {
        if i as usize >= params.len() {
            return Err(LoopError::NoSuchParameter {
                index: i,
                count: params.len(),
            });
        }
        if fed.contains(&i) {
            return Err(LoopError::Repeated { index: i });
        }
        fed.push(i);
    }
    fed.sort_unstable();
    for (i, &p) in params.iter().enumerate() {
        let instr = entry.get(p);
        if !instr.shape.is_array() {
            return Err(LoopError::NotAnArray {
                index: i,
                name: instr.name.clone(),
                shape: instr.shape.to_text(false),
            });
        }
    }
    let carried: Vec<u32> = (0..params.len() as u32)
        .filter(|i| !fed.contains(i))
        .collect();
    let outputs = step_outputs(entry);
    if outputs.len() < carried.len() {
        return Err(LoopError::TooFewOutputs {
            carried: carried.len(),
            outputs: outputs.len(),
        });
    }
    for (output, &index) in carried.iter().enumerate() {
        let p = entry.get(params[index as usize]);
        let got = &outputs[output];
        if got.to_text(false) != p.shape.to_text(false) {
            return Err(LoopError::CarriedMismatch {
                output,
                index: index as usize,
                name: p.name.clone(),
                want: p.shape.to_text(false),
                got: got.to_text(false),
            });
        }
    }
    for (output, s) in outputs.iter().enumerate().skip(carried.len()) {
        if !s.is_array() {
            return Err(LoopError::OutputNotAnArray {
                output,
                shape: s.to_text(false),
            });
        }
    }
    for c in &step.computations {
        for (_, instr) in c.instructions() {
            if matches!(instr.op, Op::Infeed { .. } | Op::Outfeed { .. }) {
                return Err(LoopError::AlreadyFeeds {
                    opcode: instr.op.opcode_name().to_string(),
                    name: instr.name.clone(),
                });
            }
        }
    }
    let per_iteration_outputs = outputs.len() - carried.len();
    Ok(LoopSignature {
        iterations,
        carried,
        fed,
        per_iteration_outputs,
    })
}

/// The step's outputs: the root tuple's elements, or the root itself when it is not a tuple.
fn step_outputs(entry: &Computation) -> Vec<Shape> {
    match &entry.get(entry.root()).shape {
        Shape::Tuple(items) => items.clone(),
        other => vec![other.clone()],
    }
}

/// Wraps `step` in a `while` loop of `iterations` iterations that reads the parameters
/// numbered in `infeed_params` from the infeed each iteration (see the module docs).
pub fn wrap_in_training_loop(
    step: &Module,
    iterations: u64,
    infeed_params: &[u32],
) -> Result<Module, LoopError> {
    let sig = loop_signature(step, iterations, infeed_params)?;
    let mut m = step.clone();
    let step_id = m.entry;
    let step_entry = m.computation(step_id).clone();
    let params = step_entry.parameters();
    let shape_of = |n: u32| step_entry.get(params[n as usize]).shape.clone();
    let root_is_tuple = step_entry.get(step_entry.root()).shape.is_tuple();
    let carried_shapes: Vec<Shape> = sig.carried.iter().map(|&n| shape_of(n)).collect();
    let counter = Shape::scalar(ElementType::S32);
    let mut state_items = vec![counter, Shape::Token];
    state_items.extend(carried_shapes.iter().cloned());
    let state = Shape::Tuple(state_items);
    let base = step_entry.name.clone();

    // condition(state) = state.0 < K
    let cond_id = m.add_computation(Computation::new(format!("{base}.loop_condition")));
    {
        let mut b = Builder::new(&mut m, cond_id);
        let p = b.add_with_shape(Op::Parameter(0), state.clone(), &[]);
        let i = b.add(Op::GetTupleElement { index: 0 }, &[p])?;
        let k = s32_constant(&mut b, iterations as i32);
        let lt = b.add(
            Op::Compare {
                direction: ComparisonDirection::Lt,
                comparison_type: None,
            },
            &[i, k],
        )?;
        b.module.computation_mut(cond_id).set_root(lt);
    }

    // body(state) = (i + 1, token, new carried...)
    let body_id = m.add_computation(Computation::new(format!("{base}.loop_body")));
    {
        let mut b = Builder::new(&mut m, body_id);
        let p = b.add_with_shape(Op::Parameter(0), state.clone(), &[]);
        let i = b.add(Op::GetTupleElement { index: 0 }, &[p])?;
        let mut token = b.add(Op::GetTupleElement { index: 1 }, &[p])?;
        let mut args: Vec<Option<InstrId>> = vec![None; params.len()];
        for (k, &n) in sig.carried.iter().enumerate() {
            args[n as usize] = Some(b.add(
                Op::GetTupleElement {
                    index: 2 + k as i64,
                },
                &[p],
            )?);
        }
        if !sig.fed.is_empty() {
            let fed_shape = Shape::Tuple(sig.fed.iter().map(|&n| shape_of(n)).collect());
            let infeed = b.add_given(
                Op::Infeed {
                    config: String::new(),
                },
                Shape::Tuple(vec![fed_shape, Shape::Token]),
                &[token],
            )?;
            let data = b.add(Op::GetTupleElement { index: 0 }, &[infeed])?;
            token = b.add(Op::GetTupleElement { index: 1 }, &[infeed])?;
            for (k, &n) in sig.fed.iter().enumerate() {
                args[n as usize] = Some(b.add(Op::GetTupleElement { index: k as i64 }, &[data])?);
            }
        }
        let args: Vec<InstrId> = args
            .into_iter()
            .map(|a| a.expect("every parameter bound"))
            .collect();
        let out = b.add(Op::Call { to_apply: step_id }, &args)?;
        let output = |b: &mut Builder, k: usize| -> Result<InstrId, ShapeError> {
            if root_is_tuple {
                b.add(Op::GetTupleElement { index: k as i64 }, &[out])
            } else {
                Ok(out)
            }
        };
        let carried_count = sig.carried.len();
        if sig.per_iteration_outputs > 0 {
            let values = (carried_count..carried_count + sig.per_iteration_outputs)
                .map(|k| output(&mut b, k))
                .collect::<Result<Vec<_>, _>>()?;
            let tuple = b.add(Op::Tuple, &values)?;
            token = b.add(
                Op::Outfeed {
                    config: String::new(),
                },
                &[tuple, token],
            )?;
        }
        let one = s32_constant(&mut b, 1);
        let next = b.add(Op::Binary(BinaryOp::Add), &[i, one])?;
        let mut items = vec![next, token];
        for k in 0..carried_count {
            items.push(output(&mut b, k)?);
        }
        let root = b.add(Op::Tuple, &items)?;
        b.module.computation_mut(body_id).set_root(root);
    }

    // entry(carried...) = while((0, after-all(), carried...)).carried
    let entry_id = m.add_computation(Computation::new(format!("{base}.training_loop")));
    {
        let mut b = Builder::new(&mut m, entry_id);
        let mut items = Vec::new();
        let zero = s32_constant(&mut b, 0);
        items.push(zero);
        items.push(b.add(Op::AfterAll, &[])?);
        for (k, &n) in sig.carried.iter().enumerate() {
            let id = b.add_with_shape(Op::Parameter(k as u32), shape_of(n), &[]);
            let instr = b.module.computation_mut(entry_id).get_mut(id);
            instr.name = format!("{}.loop", step_entry.get(params[n as usize]).name);
            items.push(id);
        }
        let init = b.add(Op::Tuple, &items)?;
        let w = b.add(
            Op::While {
                condition: cond_id,
                body: body_id,
            },
            &[init],
        )?;
        b.module
            .computation_mut(entry_id)
            .get_mut(w)
            .extra_attrs
            .push((
                "backend_config".to_string(),
                format!("{{\"known_trip_count\":{{\"n\":\"{iterations}\"}}}}"),
            ));
        let finals = (0..sig.carried.len())
            .map(|k| {
                b.add(
                    Op::GetTupleElement {
                        index: 2 + k as i64,
                    },
                    &[w],
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let root = b.add(Op::Tuple, &finals)?;
        b.module.computation_mut(entry_id).set_root(root);
    }
    m.entry = entry_id;
    Ok(m)
}

fn s32_constant(b: &mut Builder, v: i32) -> InstrId {
    b.add_with_shape(
        Op::Constant(Literal::Array(Array::scalar_s32(v))),
        Shape::scalar(ElementType::S32),
        &[],
    )
}
