//! Running JAX's data-parallel `shard_map` form on N replicas.
//!
//! JAX lowers `shard_map` to: a custom-call `xla.sdy.GlobalToLocalShape` on the global
//! arguments (its `xla.sdy.in_shardings` frontend attribute says which dimensions of each
//! operand are split over which mesh axes), a `call` of the per-replica program
//! `xla.sdy.manual_computation_body.N` (collectives inside), and a custom-call
//! `xla.sdy.LocalToGlobalShape` (its `xla.sdy.out_shardings` say how the per-replica results
//! form the global ones). The mesh is in the module's `xla.sdy.meshes` attribute.
//!
//! [`ShardMap`] splits the global arguments, runs the body on every replica with any
//! [`ReplicaBackend`] (the interpreter, or a JIT [`crate::executable::Executable`] compiled
//! from [`ShardMap::body`]), and assembles the global results: sharded dimensions are
//! concatenated in replica order, unsharded results are taken from replica 0.
//! [`run_sharded`] is that with the interpreter.

use crate::replicas::{Interpreted, ReplicaBackend, ReplicaError};
use std::fmt;
use tessel_compiler::interpreter::EvalError;
use tessel_compiler::ir::{
    Array, ArrayData, ArrayShape, ComputationId, InstrId, Literal, Module, Op,
};

pub const GLOBAL_TO_LOCAL: &str = "xla.sdy.GlobalToLocalShape";
pub const LOCAL_TO_GLOBAL: &str = "xla.sdy.LocalToGlobalShape";

/// Why a shard_map module could not be run.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardMapError {
    pub message: String,
}

impl fmt::Display for ShardMapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ShardMapError {}

impl From<ReplicaError> for ShardMapError {
    fn from(e: ReplicaError) -> Self {
        ShardMapError {
            message: e.to_string(),
        }
    }
}

impl From<EvalError> for ShardMapError {
    fn from(e: EvalError) -> Self {
        ShardMapError {
            message: e.to_string(),
        }
    }
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

/// The mesh: axis names and sizes, in order (major to minor).
#[derive(Clone, Debug, PartialEq)]
pub struct Mesh {
    pub axes: Vec<(String, usize)>,
}

impl Mesh {
    /// Reads `xla.sdy.meshes={mesh = #sdy.mesh<["r"=4]>}` from the module's attributes.
    pub fn of_module(module: &Module) -> Result<Mesh, ShardMapError> {
        let text = module
            .frontend_attributes
            .iter()
            .find(|(k, _)| k == "xla.sdy.meshes")
            .map(|(_, v)| v.replace('\\', ""))
            .ok_or_else(|| ShardMapError {
                message: "the module has no xla.sdy.meshes attribute, so its mesh is unknown"
                    .into(),
            })?;
        let mut axes = Vec::new();
        let mut rest = text.as_str();
        while let Some(start) = rest.find('"') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('"') else { break };
            let name = after[..end].to_string();
            let tail = after[end + 1..].trim_start();
            let Some(tail) = tail.strip_prefix('=') else {
                rest = &after[end + 1..];
                continue;
            };
            let digits: String = tail
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            let size = digits.parse::<usize>().map_err(|_| ShardMapError {
                message: format!("cannot read the size of mesh axis \"{name}\" in {text}"),
            })?;
            axes.push((name, size));
            rest = tail;
        }
        if axes.is_empty() {
            return fail(format!("no mesh axes in xla.sdy.meshes={text}"));
        }
        Ok(Mesh { axes })
    }

    pub fn device_count(&self) -> usize {
        self.axes.iter().map(|(_, s)| s).product()
    }

    fn axis(&self, name: &str) -> Result<(usize, usize), ShardMapError> {
        self.axes
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| (i, self.axes[i].1))
            .ok_or_else(|| ShardMapError {
                message: format!(
                    "sharding names mesh axis \"{name}\", which the mesh does not have"
                ),
            })
    }

    /// The coordinate of `device` along axis `i` (devices are numbered row-major over the axes).
    fn coordinate(&self, device: usize, i: usize) -> usize {
        let minor: usize = self.axes[i + 1..].iter().map(|(_, s)| s).product();
        (device / minor) % self.axes[i].1
    }
}

/// Per value, per dimension: the mesh axes that dimension is split over (major first).
pub type Sharding = Vec<Vec<String>>;

/// Parses `#sdy.sharding_per_value<[<@mesh, [{}, {"r"}]>, <@mesh, []>]>`.
pub fn parse_shardings(text: &str) -> Result<Vec<Sharding>, ShardMapError> {
    let text = text.replace('\\', "");
    let bad = |why: &str| ShardMapError {
        message: format!("cannot read sharding {text}: {why}"),
    };
    let start = text
        .find("sharding_per_value<[")
        .ok_or_else(|| bad("no sharding_per_value"))?;
    let mut s = &text[start + "sharding_per_value<[".len()..];
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if s.starts_with(']') {
            return Ok(out);
        }
        s = s.strip_prefix("<@").ok_or_else(|| bad("expected <@mesh"))?;
        let open = s.find('[').ok_or_else(|| bad("expected ["))?;
        s = &s[open + 1..];
        let mut dims = Vec::new();
        loop {
            s = s.trim_start_matches([' ', ',']);
            if let Some(rest) = s.strip_prefix(']') {
                s = rest;
                break;
            }
            s = s
                .strip_prefix('{')
                .ok_or_else(|| bad("expected { for a dimension"))?;
            let close = s.find('}').ok_or_else(|| bad("unclosed {"))?;
            let inner = &s[..close];
            let axes: Vec<String> = inner
                .split('"')
                .enumerate()
                .filter(|(i, _)| i % 2 == 1)
                .map(|(_, a)| a.to_string())
                .collect();
            dims.push(axes);
            s = &s[close + 1..];
        }
        let close = s.find('>').ok_or_else(|| bad("expected >"))?;
        s = &s[close + 1..];
        out.push(dims);
    }
}

/// The sharding attribute `key` of an instruction's frontend attributes.
fn sharding_attr(module: &Module, id: InstrId, key: &str) -> Result<Vec<Sharding>, ShardMapError> {
    let instr = module.entry().get(id);
    let text = instr
        .extra_attrs
        .iter()
        .find_map(|(k, v)| {
            if k == key {
                Some(v.clone())
            } else {
                v.find(key).map(|i| v[i..].to_string())
            }
        })
        .ok_or_else(|| ShardMapError {
            message: format!("{} has no {key} attribute", instr.name),
        })?;
    parse_shardings(&text)
}

/// Which part of a global array each device holds.
struct Split<'a> {
    mesh: &'a Mesh,
    sharding: &'a Sharding,
}

impl Split<'_> {
    /// Number of pieces dimension `d` is split into, and device `r`'s piece index.
    fn piece(&self, d: usize, device: usize) -> Result<(usize, usize), ShardMapError> {
        let mut count = 1;
        let mut index = 0;
        for axis in self.sharding.get(d).map(|v| v.as_slice()).unwrap_or(&[]) {
            let (i, size) = self.mesh.axis(axis)?;
            index = index * size + self.mesh.coordinate(device, i);
            count *= size;
        }
        Ok((count, index))
    }

    fn is_replicated(&self) -> bool {
        self.sharding.iter().all(|axes| axes.is_empty())
    }

    /// The local shape and the offset of device `r`'s block in the global array.
    fn block(
        &self,
        global: &ArrayShape,
        device: usize,
    ) -> Result<(ArrayShape, Vec<i64>), ShardMapError> {
        if self.sharding.len() != global.rank() && !self.sharding.is_empty() {
            return fail(format!(
                "a sharding of {} dimensions for an array {global}",
                self.sharding.len()
            ));
        }
        let mut dims = Vec::with_capacity(global.rank());
        let mut offsets = Vec::with_capacity(global.rank());
        for (d, &n) in global.dims.iter().enumerate() {
            let (count, index) = self.piece(d, device)?;
            if n % count as i64 != 0 {
                return fail(format!(
                    "dimension {d} of {global} does not split into {count} equal parts"
                ));
            }
            let local = n / count as i64;
            dims.push(local);
            offsets.push(local * index as i64);
        }
        Ok((ArrayShape::new(global.element_type, &dims), offsets))
    }
}

/// Copies the block of `global` at `offsets` with the dims of `local` out of (`extract`) or
/// into (`!extract`) `global`'s bytes.
fn copy_block(
    global: &ArrayShape,
    global_bytes: &mut [u8],
    local: &ArrayShape,
    local_bytes: &mut [u8],
    offsets: &[i64],
    extract: bool,
) {
    let w = global.element_type.byte_size();
    let rank = global.rank();
    if local.element_count() == 0 {
        return;
    }
    if rank == 0 {
        if extract {
            local_bytes.copy_from_slice(&global_bytes[..w]);
        } else {
            global_bytes[..w].copy_from_slice(local_bytes);
        }
        return;
    }
    let gstrides = global.strides();
    let row = local.dims[rank - 1] as usize * w;
    let mut index = vec![0i64; rank - 1];
    let mut li = 0usize;
    loop {
        let mut off = offsets[rank - 1];
        for d in 0..rank - 1 {
            off += (offsets[d] + index[d]) * gstrides[d];
        }
        let g = off as usize * w;
        if extract {
            local_bytes[li..li + row].copy_from_slice(&global_bytes[g..g + row]);
        } else {
            global_bytes[g..g + row].copy_from_slice(&local_bytes[li..li + row]);
        }
        li += row;
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < local.dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

fn from_bytes(shape: ArrayShape, bytes: &[u8]) -> Array {
    let data = ArrayData::from_le_bytes(shape.element_type, bytes).expect("whole elements");
    Array::new(shape, data)
}

/// The pieces of the entry: parameters feeding GlobalToLocalShape, the body call, and how the
/// root's leaves come out of LocalToGlobalShape.
struct Form {
    /// For each body argument: the entry parameter it comes from and its sharding.
    body_args: Vec<(usize, Sharding)>,
    body: ComputationId,
    /// For each root leaf: the body output it is and its sharding.
    outputs: Vec<(usize, Sharding)>,
}

fn find_form(module: &Module) -> Result<Form, ShardMapError> {
    let e = module.entry();
    let find = |target: &str| -> Result<InstrId, ShardMapError> {
        let found: Vec<InstrId> = e
            .ids()
            .iter()
            .copied()
            .filter(|&id| matches!(&e.get(id).op, Op::CustomCall { target: t, .. } if t == target))
            .collect();
        match found[..] {
            [one] => Ok(one),
            _ => fail(format!(
                "expected one {target} custom-call in the entry, found {}",
                found.len()
            )),
        }
    };
    let g2l = find(GLOBAL_TO_LOCAL)?;
    let l2g = find(LOCAL_TO_GLOBAL)?;
    let in_shardings = sharding_attr(module, g2l, "xla.sdy.in_shardings")?;
    let out_shardings = sharding_attr(module, l2g, "xla.sdy.out_shardings")?;
    let g2l_params: Vec<usize> = e
        .get(g2l)
        .operands()
        .iter()
        .map(|&o| match e.get(o).op {
            Op::Parameter(n) => Ok(n as usize),
            _ => fail(format!(
                "{GLOBAL_TO_LOCAL} operand {} is not an entry parameter",
                e.get(o).name
            )),
        })
        .collect::<Result<_, _>>()?;
    if in_shardings.len() != g2l_params.len() {
        return fail(format!(
            "{GLOBAL_TO_LOCAL} has {} operands but {} in_shardings",
            g2l_params.len(),
            in_shardings.len()
        ));
    }
    // Which output of `producer` an instruction is: a get-tuple-element of it, or itself.
    let output_of = |id: InstrId, producer: InstrId| -> Option<usize> {
        if id == producer {
            return Some(0);
        }
        match e.get(id).op {
            Op::GetTupleElement { index } if e.get(id).operands()[0] == producer => {
                Some(index as usize)
            }
            _ => None,
        }
    };
    let calls: Vec<InstrId> = e
        .ids()
        .iter()
        .copied()
        .filter(|&id| matches!(e.get(id).op, Op::Call { .. }))
        .collect();
    let [call] = calls[..] else {
        return fail(format!(
            "expected one call of the manual computation body, found {}",
            calls.len()
        ));
    };
    let Op::Call { to_apply: body } = e.get(call).op else {
        unreachable!()
    };
    let body_args = e
        .get(call)
        .operands()
        .iter()
        .map(|&o| {
            let i = output_of(o, g2l).ok_or_else(|| ShardMapError {
                message: format!(
                    "body argument {} does not come from {GLOBAL_TO_LOCAL}",
                    e.get(o).name
                ),
            })?;
            Ok((g2l_params[i], in_shardings[i].clone()))
        })
        .collect::<Result<Vec<_>, ShardMapError>>()?;
    let l2g_sources: Vec<usize> = e
        .get(l2g)
        .operands()
        .iter()
        .map(|&o| {
            output_of(o, call).ok_or_else(|| ShardMapError {
                message: format!(
                    "{LOCAL_TO_GLOBAL} operand {} is not a body output",
                    e.get(o).name
                ),
            })
        })
        .collect::<Result<_, _>>()?;
    if out_shardings.len() != l2g_sources.len() {
        return fail(format!(
            "{LOCAL_TO_GLOBAL} has {} operands but {} out_shardings",
            l2g_sources.len(),
            out_shardings.len()
        ));
    }
    let root = e.root();
    let leaves: Vec<InstrId> = match e.get(root).op {
        Op::Tuple => e.get(root).operands().to_vec(),
        _ => vec![root],
    };
    let outputs = leaves
        .iter()
        .map(|&l| {
            let i = output_of(l, l2g).ok_or_else(|| ShardMapError {
                message: format!(
                    "root element {} does not come from {LOCAL_TO_GLOBAL}",
                    e.get(l).name
                ),
            })?;
            Ok((l2g_sources[i], out_shardings[i].clone()))
        })
        .collect::<Result<Vec<_>, ShardMapError>>()?;
    for &id in e.ids() {
        let op = &e.get(id).op;
        if !matches!(
            op,
            Op::Parameter(_)
                | Op::CustomCall { .. }
                | Op::GetTupleElement { .. }
                | Op::Call { .. }
                | Op::Tuple
        ) {
            return fail(format!(
                "the entry computes {} outside the manual computation; only the plain shard_map form is supported",
                e.get(id).name
            ));
        }
    }
    Ok(Form {
        body_args,
        body,
        outputs,
    })
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
    pub fn body_parameter_sources(&self) -> Vec<usize> {
        self.form.body_args.iter().map(|(p, _)| *p).collect()
    }

    /// For each leaf of the entry's root, the body output it is assembled from.
    pub fn output_sources(&self) -> Vec<usize> {
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

    /// Splits `global_args`, runs the body on every replica with `backend` (which must run
    /// [`ShardMap::body`]), and assembles the global outputs.
    pub fn run(
        &self,
        backend: &dyn ReplicaBackend,
        global_args: &[Array],
    ) -> Result<Vec<Array>, ShardMapError> {
        let args = self.split(global_args)?;
        let results = backend.run_replicas(args)?;
        self.assemble(&results)
    }
}

/// Runs a shard_map module on `replicas` replicas with the interpreter: `global_args` are
/// the entry's arguments, the result is the entry root's leaves, global.
pub fn run_sharded(
    module: &Module,
    global_args: &[Array],
    replicas: usize,
) -> Result<Vec<Array>, ShardMapError> {
    let sharded = ShardMap::new(module, replicas)?;
    sharded.run(&Interpreted(sharded.body()), global_args)
}

/// The per-replica program of a shard_map module: the module with the manual computation's
/// body as its entry (what every replica runs; `tessel compile` compiles this).
pub fn per_replica_module(module: &Module) -> Result<Module, ShardMapError> {
    let form = find_form(module)?;
    let mut body = module.clone();
    body.entry = form.body;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_shardings_with_escaped_quotes() {
        let s = parse_shardings(
            r#"#sdy.sharding_per_value<[<@mesh, [{}, {}]>, <@mesh, [{\"r\"}, {}]>, <@mesh, []>]>"#,
        )
        .unwrap();
        assert_eq!(
            s,
            vec![
                vec![vec![], vec![]],
                vec![vec!["r".to_string()], vec![]],
                vec![]
            ]
        );
    }

    #[test]
    fn splits_and_reassembles_blocks() {
        let mesh = Mesh {
            axes: vec![("r".into(), 2)],
        };
        let sharding = vec![vec![], vec!["r".to_string()]];
        let split = Split {
            mesh: &mesh,
            sharding: &sharding,
        };
        let global = Array::f32(&[2, 4], (0..8).map(|x| x as f32).collect());
        let mut gbytes = global.data.to_le_bytes();
        let mut pieces = Vec::new();
        for r in 0..2 {
            let (local, offsets) = split.block(&global.shape, r).unwrap();
            let mut lbytes = vec![0u8; local.byte_size() as usize];
            copy_block(
                &global.shape,
                &mut gbytes,
                &local,
                &mut lbytes,
                &offsets,
                true,
            );
            pieces.push(from_bytes(local, &lbytes));
        }
        assert_eq!(pieces[0], Array::f32(&[2, 2], vec![0., 1., 4., 5.]));
        assert_eq!(pieces[1], Array::f32(&[2, 2], vec![2., 3., 6., 7.]));
        let mut back = vec![0u8; 32];
        for (r, p) in pieces.iter().enumerate() {
            let (local, offsets) = split.block(&global.shape, r).unwrap();
            let mut lbytes = p.data.to_le_bytes();
            copy_block(
                &global.shape,
                &mut back,
                &local,
                &mut lbytes,
                &offsets,
                false,
            );
        }
        assert_eq!(from_bytes(global.shape.clone(), &back), global);
    }

    #[test]
    fn two_axis_meshes_number_devices_row_major() {
        let mut m = Module::new("m");
        m.frontend_attributes.push((
            "xla.sdy.meshes".into(),
            r#"{mesh = #sdy.mesh<[\"x\"=2, \"y\"=3]>}"#.into(),
        ));
        let mesh = Mesh::of_module(&m).unwrap();
        assert_eq!(mesh.axes, vec![("x".to_string(), 2), ("y".to_string(), 3)]);
        assert_eq!(mesh.device_count(), 6);
        // Device 4 is (x=1, y=1); a dimension split over ("x", "y") has 6 pieces, piece 4.
        let sharding = vec![
            vec!["x".to_string(), "y".to_string()],
            vec!["y".to_string()],
        ];
        let split = Split {
            mesh: &mesh,
            sharding: &sharding,
        };
        assert_eq!(split.piece(0, 4).unwrap(), (6, 4));
        assert_eq!(split.piece(1, 4).unwrap(), (3, 1));
        let bad = vec![vec!["z".to_string()]];
        let split = Split {
            mesh: &mesh,
            sharding: &bad,
        };
        assert!(split.piece(0, 0).unwrap_err().message.contains("\"z\""));
    }

    #[test]
    fn a_module_without_a_mesh_is_explained() {
        let e = Mesh::of_module(&Module::new("m")).unwrap_err();
        assert!(e.message.contains("xla.sdy.meshes"), "{e}");
    }
}
