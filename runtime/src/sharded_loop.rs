//! A training loop over a shard_map module: the per-replica body is wrapped in the loop and
//! runs on every replica; the host splits the global state once and every iteration's global
//! batch by the module's in-shardings (each replica's infeed queue gets its own piece), and
//! assembles the final state and the per-iteration outputs by the out-shardings.
//!
//! The body's parameters and outputs must be the entry's, in the same order (JAX's
//! `shard_map` of a train step is): then the loop contract (fed and carried parameters, the
//! first outputs being the carried parameters' new values) reads the same on the body.

use crate::feed::{stack, unstack};
use crate::shard_map::ShardMap;
use crate::training_loop::{LoopBackend, LoopOptions, TrainingLoop};
use tessel_compiler::ir::{Array, Literal, Module};

pub struct ShardedLoop {
    shard_map: ShardMap,
    /// The loop around the per-replica body.
    pub body_loop: TrainingLoop,
}

impl ShardedLoop {
    pub fn new(
        step: &Module,
        replicas: usize,
        iterations: u64,
        infeed: &[u32],
        backend: &LoopBackend,
    ) -> Result<ShardedLoop, String> {
        let shard_map = ShardMap::new(step, replicas).map_err(|e| e.to_string())?;
        let params = step.entry().parameters().len();
        let sources = shard_map.body_parameter_sources();
        if sources != (0..params).collect::<Vec<_>>() {
            return Err(format!(
                "--loop on a shard_map module needs the body's parameters to be the entry's in order (they come from entry parameters {sources:?})"
            ));
        }
        let outputs = shard_map.output_sources();
        if outputs != (0..outputs.len()).collect::<Vec<_>>() {
            return Err(format!(
                "--loop on a shard_map module needs the entry's outputs to be the body's in order (they are body outputs {outputs:?})"
            ));
        }
        let body_loop = TrainingLoop::with_backend(shard_map.body(), iterations, infeed, backend)?;
        Ok(ShardedLoop {
            shard_map,
            body_loop,
        })
    }

    /// Runs the loop on the entry's global arguments in parameter order (fed ones stacked K
    /// deep on a leading axis); returns the entry's outputs, global: the final carried values,
    /// then the per-iteration outputs stacked K deep.
    pub fn run(&self, global: Vec<Array>, options: &LoopOptions) -> Result<Vec<Array>, String> {
        let sig = &self.body_loop.signature;
        let k = sig.iterations as usize;
        let n = self.shard_map.replicas();
        let mut fed_slices: Vec<Vec<Array>> = Vec::new();
        for &i in &sig.fed {
            let a = global
                .get(i as usize)
                .ok_or_else(|| format!("no argument for parameter {i}"))?;
            fed_slices.push(unstack(a)?);
        }
        if fed_slices.iter().any(|s| s.len() != k) {
            return Err(format!("fed arguments must be stacked {k} deep"));
        }
        // Every replica's pieces per iteration: the global arguments with iteration j's batch.
        let mut per_replica: Vec<Vec<Vec<Array>>> = vec![Vec::with_capacity(k); n];
        for j in 0..k {
            let mut args = global.clone();
            for (s, &i) in fed_slices.iter().zip(&sig.fed) {
                args[i as usize] = s[j].clone();
            }
            let split = self.shard_map.split(&args).map_err(|e| e.to_string())?;
            for (r, pieces) in split.into_iter().enumerate() {
                let arrays = pieces
                    .into_iter()
                    .map(|l| l.into_array().ok_or("a body argument is not an array"))
                    .collect::<Result<Vec<_>, _>>()?;
                per_replica[r].push(arrays);
            }
        }
        // Replica r's loop arguments: its carried pieces, its fed pieces stacked K deep.
        let loop_args = per_replica
            .iter()
            .map(|iters| {
                (0..iters[0].len())
                    .map(|i| {
                        if sig.fed.contains(&(i as u32)) {
                            let parts: Vec<Array> = iters.iter().map(|a| a[i].clone()).collect();
                            stack(&parts)
                        } else {
                            Ok(iters[0][i].clone())
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = self
            .body_loop
            .run(loop_args, options)
            .map_err(|e| e.to_string())?;
        // Iteration j's body results per replica: the final state with that iteration's values.
        let per_iteration: Vec<Vec<Vec<Array>>> = out
            .per_iteration
            .iter()
            .map(|stacked| stacked.iter().map(unstack).collect::<Result<Vec<_>, _>>())
            .collect::<Result<_, _>>()?;
        let mut assembled: Vec<Vec<Array>> = Vec::with_capacity(k);
        for j in 0..k {
            let results: Vec<Literal> = (0..n)
                .map(|r| {
                    let mut leaves: Vec<Literal> =
                        out.carried[r].iter().cloned().map(Literal::Array).collect();
                    leaves.extend(
                        per_iteration[r]
                            .iter()
                            .map(|values| Literal::Array(values[j].clone())),
                    );
                    Literal::Tuple(leaves)
                })
                .collect();
            assembled.push(
                self.shard_map
                    .assemble(&results)
                    .map_err(|e| e.to_string())?,
            );
        }
        let c = sig.carried.len();
        let mut outputs = assembled[0][..c].to_vec();
        for o in c..assembled[0].len() {
            let parts: Vec<Array> = assembled.iter().map(|a| a[o].clone()).collect();
            outputs.push(stack(&parts)?);
        }
        Ok(outputs)
    }
}
