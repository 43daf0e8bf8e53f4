//! JAX's data-parallel `shard_map` form, prepared for N replicas.
//!
//! JAX lowers `shard_map` to: a custom-call `xla.sdy.GlobalToLocalShape` on the global
//! arguments (its `xla.sdy.in_shardings` frontend attribute says which dimensions of each
//! operand are split over which mesh axes), a `call` of the per-replica program
//! `xla.sdy.manual_computation_body.N` (collectives inside), and a custom-call
//! `xla.sdy.LocalToGlobalShape` (its `xla.sdy.out_shardings` say how the per-replica results
//! form the global ones). The mesh is in the module's `xla.sdy.meshes` attribute.
//!
//! One job per file: [`mesh`] reads the mesh and the sharding attributes, [`form`] finds the
//! form in the entry and cuts out the per-replica module, [`blocks`] copies a device's block
//! out of (and back into) a global array. [`ShardMap`] puts them together: it splits the
//! global arguments and assembles the global results (sharded dimensions are concatenated in
//! replica order, unsharded results are taken from replica 0). Running the per-replica
//! program is the session's job (`crate::session::Program`).

mod blocks;
mod form;
mod mesh;

pub use form::per_replica_module;
pub(crate) use form::GLOBAL_TO_LOCAL;
pub use mesh::{Mesh, Sharding};

use blocks::{copy_block, from_bytes, Split};
use form::{find_form, Form};
use tessel_compiler::ir::{Array, ArrayShape, Literal, Module, Op};
use thiserror::Error;

/// Why a shard_map module could not be prepared, split or assembled.
#[derive(Clone, Debug, PartialEq, Error)]
#[error("{message}")]
pub struct ShardMapError {
    pub message: String,
}

fn fail<T>(message: impl Into<String>) -> Result<T, ShardMapError> {
    Err(ShardMapError {
        message: message.into(),
    })
}

/// Whether the entry of `module` is in the shard_map form (has a GlobalToLocalShape call).
pub fn is_shard_map_module(module: &Module) -> bool {
    let e = module.entry();
    e.ids().iter().any(
        |&id| matches!(&e.get(id).op, Op::CustomCall { target, .. } if target == GLOBAL_TO_LOCAL),
    )
}

/// A shard_map module prepared for `replicas` replicas: the per-replica body as a module of
/// its own (what a backend compiles once), and how global arguments split into per-replica
/// arguments and per-replica results assemble into global outputs.
pub struct ShardMap {
    mesh: Mesh,
    form: Form,
    replicas: usize,
    params: Vec<ArrayShape>,
    body: Module,
}

impl ShardMap {
    pub fn new(module: &Module, replicas: usize) -> Result<ShardMap, ShardMapError> {
        let mesh = Mesh::of_module(module)?;
        if mesh.device_count() != replicas {
            return fail(format!(
                "the module's mesh {:?} has {} devices, but {replicas} replicas were asked for",
                mesh.axes,
                mesh.device_count()
            ));
        }
        let form = find_form(module)?;
        let (params, _) = module.entry_signature();
        let params = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                p.as_array().cloned().ok_or_else(|| ShardMapError {
                    message: format!("parameter {i} is not an array"),
                })
            })
            .collect::<Result<_, _>>()?;
        let mut body = module.clone();
        body.entry = form.body;
        Ok(ShardMap {
            mesh,
            form,
            replicas,
            params,
            body,
        })
    }

    /// The per-replica program: the module with the manual computation body as its entry.
    pub fn body(&self) -> &Module {
        &self.body
    }

    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// For each parameter of the body, the entry parameter it is cut from.
    pub(crate) fn body_parameter_sources(&self) -> Vec<usize> {
        self.form.body_args.iter().map(|(p, _)| *p).collect()
    }

    /// For each leaf of the entry's root, the body output it is assembled from.
    pub(crate) fn output_sources(&self) -> Vec<usize> {
        self.form.outputs.iter().map(|(j, _)| *j).collect()
    }

    /// Replica r's body arguments (`[r]`) cut out of the entry's global arguments.
    pub fn split(&self, global_args: &[Array]) -> Result<Vec<Vec<Literal>>, ShardMapError> {
        if global_args.len() != self.params.len() {
            return fail(format!(
                "the module takes {} arguments, {} given",
                self.params.len(),
                global_args.len()
            ));
        }
        for (i, (a, p)) in global_args.iter().zip(&self.params).enumerate() {
            if a.shape.element_type != p.element_type || a.shape.dims != p.dims {
                return fail(format!("argument {i} should be {p}, got {}", a.shape));
            }
        }
        let mut per_replica: Vec<Vec<Literal>> =
            vec![Vec::with_capacity(self.form.body_args.len()); self.replicas];
        for (param, sharding) in &self.form.body_args {
            let global = &global_args[*param];
            let split = Split {
                mesh: &self.mesh,
                sharding,
            };
            let mut gbytes = global.data.to_le_bytes();
            for (r, args) in per_replica.iter_mut().enumerate() {
                let (local, offsets) = split.block(&global.shape, r)?;
                let mut lbytes = vec![0u8; local.byte_size() as usize];
                copy_block(
                    &global.shape,
                    &mut gbytes,
                    &local,
                    &mut lbytes,
                    &offsets,
                    true,
                );
                args.push(Literal::Array(from_bytes(local, &lbytes)));
            }
        }
        Ok(per_replica)
    }

    /// The entry root's leaves, global, from every replica's body result (`results[r]`).
    pub fn assemble(&self, results: &[Literal]) -> Result<Vec<Array>, ShardMapError> {
        if results.len() != self.replicas {
            return fail(format!(
                "{} replica results for {} replicas",
                results.len(),
                self.replicas
            ));
        }
        let body_output = |r: usize, j: usize| -> Result<&Array, ShardMapError> {
            let leaf = match &results[r] {
                Literal::Tuple(t) => t.get(j),
                l if j == 0 => Some(l),
                _ => None,
            };
            leaf.and_then(|l| l.as_array())
                .ok_or_else(|| ShardMapError {
                    message: format!("the body has no array output {j}"),
                })
        };
        self.form
            .outputs
            .iter()
            .map(|(j, sharding)| {
                let split = Split {
                    mesh: &self.mesh,
                    sharding,
                };
                let first = body_output(0, *j)?;
                if split.is_replicated() {
                    return Ok(first.clone());
                }
                // The global shape: every split dimension times its number of pieces.
                let mut dims = first.shape.dims.clone();
                for (d, n) in dims.iter_mut().enumerate() {
                    *n *= split.piece(d, 0)?.0 as i64;
                }
                let global = ArrayShape::new(first.element_type(), &dims);
                let mut gbytes = vec![0u8; global.byte_size() as usize];
                for r in 0..self.replicas {
                    let local = body_output(r, *j)?;
                    let (shape, offsets) = split.block(&global, r)?;
                    if shape.dims != local.shape.dims {
                        return fail(format!(
                            "replica {r} produced {} for output {j}, expected {shape}",
                            local.shape
                        ));
                    }
                    let mut lbytes = local.data.to_le_bytes();
                    copy_block(&global, &mut gbytes, &shape, &mut lbytes, &offsets, false);
                }
                Ok(from_bytes(global, &gbytes))
            })
            .collect()
    }
}
