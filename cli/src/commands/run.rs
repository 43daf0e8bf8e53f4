//! `tessel run FILE --inputs IN --outputs OUT [--backend interp|jit] [--replicas N] [--loop K --infeed I,J] [--repeat R]`
//!
//! Inputs are keyed `"0"`, `"1"`, ... by entry parameter number; outputs by the flattened
//! leaves of the entry's root. With `--replicas N`, a shard_map module takes and gives the
//! global arrays; a module that is already per-replica takes `"I"` for every replica, `"R/I"`
//! overriding it for replica R, and writes `"R/I"`. Both backends run replicas: the JIT
//! compiles the per-replica program once and runs it on N threads with
//! `Executable::run_replicated`, each replica's GEMM using `ThreadBudget::per_replica(N)`
//! threads.
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, ArrayShape, Literal, Module, Shape};
use tessel_runtime::host_io::{read_safetensors, write_safetensors};
use tessel_runtime::jit::{ConvAlgorithm, Executable, JitOptions};
use tessel_runtime::replicas::evaluate_replicated;
use tessel_runtime::shard_map::{is_shard_map_module, run_sharded, Mesh, ShardMap};
use tessel_runtime::threads::ThreadBudget;

#[derive(Args)]
pub struct RunArgs {
    /// The HLO module to run (text, as XLA and JAX print it).
    pub file: PathBuf,
    /// Arguments keyed "0", "1", ... by parameter number ("I" / "R/I" for per-replica modules).
    #[arg(long)]
    pub inputs: PathBuf,
    /// Where to write the results, keyed by the flattened leaves of the root ("0", "1", ...).
    #[arg(long)]
    pub outputs: PathBuf,
    /// `interp` (the reference interpreter) or `jit` (optimizer + Cranelift).
    #[arg(long, default_value = "interp")]
    pub backend: String,
    /// Number of replicas: a shard_map module takes and gives global arrays.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Run the step K times as one compiled while loop (parameters not in --infeed are carried).
    #[arg(long = "loop")]
    pub loop_iterations: Option<usize>,
    /// With --loop: parameters fed one slice per iteration from inputs stacked K deep.
    #[arg(long, value_delimiter = ',')]
    pub infeed: Vec<u32>,
    /// Run R more times after a warm-up and print compile_ms and run_ms_median.
    #[arg(long)]
    pub repeat: Option<usize>,
    /// With --loop: fail if carried float state holds a NaN after the loop.
    #[arg(long)]
    pub nan_check: bool,
    /// With --loop: batches each replica's infeed queue holds ahead of the device.
    #[arg(long)]
    pub infeed_depth: Option<usize>,
    /// With --backend jit: print the time of every kernel and GEMM call, per run, after the runs
    /// (the warm-up run is not counted when --repeat is given).
    #[arg(long)]
    pub profile: bool,
    /// With --backend jit: `auto` (specialized convolution routines where they fit) or `gemm`
    /// (always the general patch-matrix GEMM).
    #[arg(long, default_value = "auto")]
    pub conv_algorithm: ConvAlgorithm,
}

/// What executes the module. The JIT plugs in here when the runtime offers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Interp,
    Jit,
}

impl Backend {
    pub fn parse(name: &str) -> Result<Backend, String> {
        match name {
            "interp" => Ok(Backend::Interp),
            "jit" => Ok(Backend::Jit),
            other => Err(format!(
                "unknown backend \"{other}\" (expected interp or jit)"
            )),
        }
    }
}

pub fn run(args: &RunArgs) -> ExitCode {
    match execute(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => super::fail(message),
    }
}

fn execute(args: &RunArgs) -> Result<(), String> {
    let backend = Backend::parse(&args.backend)?;
    if args.loop_iterations.is_none()
        && (!args.infeed.is_empty() || args.nan_check || args.infeed_depth.is_some())
    {
        return Err("--infeed, --infeed-depth and --nan-check go with --loop K".into());
    }
    if args.infeed_depth == Some(0) {
        return Err("--infeed-depth must be at least 1".into());
    }
    if args.replicas == 0 {
        return Err("--replicas must be at least 1".into());
    }
    if args.profile && backend != Backend::Jit {
        return Err("--profile times the JIT's kernels (use it with --backend jit)".into());
    }
    if args.repeat == Some(0) {
        return Err("--repeat must be at least 1".into());
    }
    let load_start = Instant::now();
    let module =
        tessel_compiler::hlo_text::parse_module_file(&args.file).map_err(|e| e.to_string())?;
    if let Err(errors) = tessel_compiler::verifier::verify(&module) {
        let list: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
        return Err(format!(
            "{} is not a legal module:\n{}",
            args.file.display(),
            list.join("\n")
        ));
    }
    // The JIT stands for the device: what a TPU cannot run is rejected, as `tessel check` does.
    // The interpreter is the reference and runs any well-formed module.
    if backend == Backend::Jit {
        let diagnostics = tessel_compiler::legality::check_legality(&module);
        if !diagnostics.is_empty() {
            eprint!(
                "{}",
                tessel_compiler::legality::render(&diagnostics, &module)
            );
            return Err(format!(
                "{} cannot run on the device ({} diagnostic{}); the reference interpreter \
                 (--backend interp) runs it",
                args.file.display(),
                diagnostics.len(),
                if diagnostics.len() == 1 { "" } else { "s" }
            ));
        }
    }
    // The interpreter has no compile step: parsing and verifying is what precedes a run.
    let compile_ms = load_start.elapsed().as_secs_f64() * 1e3;
    let inputs = read_safetensors(&args.inputs).map_err(|e| e.to_string())?;
    if let Some(iterations) = args.loop_iterations {
        let req = super::run_loop::LoopRequest {
            iterations,
            jit: backend == Backend::Jit,
            infeed: &args.infeed,
            replicas: args.replicas,
            repeat: args.repeat,
            nan_check: args.nan_check,
            queue_depth: args.infeed_depth,
            profile: args.profile,
            conv_algorithm: args.conv_algorithm,
        };
        let outputs = super::run_loop::run_loop(&module, inputs, &req, load_start)?;
        return write_safetensors(&args.outputs, &outputs).map_err(|e| e.to_string());
    }
    let job = Job::new(&module, inputs, args.replicas)?;
    if backend == Backend::Jit {
        return execute_jit(args, &module, &job, load_start);
    }
    let outputs = job.run()?;
    if let Some(repeat) = args.repeat {
        let mut times = Vec::with_capacity(repeat);
        for _ in 0..repeat {
            let start = Instant::now();
            job.run()?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!("compile_ms: {compile_ms:.3}");
        println!("run_ms_median: {:.3}", median(&times));
    }
    write_safetensors(&args.outputs, &outputs).map_err(|e| e.to_string())
}

/// `--backend jit`: the optimization pipeline, then the Cranelift JIT, on one replica or N.
fn execute_jit(
    args: &RunArgs,
    module: &Module,
    job: &Job,
    load_start: Instant,
) -> Result<(), String> {
    let budget = ThreadBudget::from_env()?;
    let base = JitOptions {
        profile: args.profile,
        conv_algorithm: args.conv_algorithm,
        ..JitOptions::default()
    };
    let compiled = JitJob::new(module, job, &budget, base)?;
    let compile_ms = load_start.elapsed().as_secs_f64() * 1e3;
    let outputs = compiled.run()?;
    if let (Some(profile), Some(_)) = (compiled.exe.profile(), args.repeat) {
        profile.reset();
    }
    if let Some(repeat) = args.repeat {
        let mut times = Vec::with_capacity(repeat);
        for _ in 0..repeat {
            let start = Instant::now();
            compiled.run()?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!("compile_ms: {compile_ms:.3}");
        println!("run_ms_median: {:.3}", median(&times));
    }
    if let Some(profile) = compiled.exe.profile() {
        let runs = args.repeat.unwrap_or(1) as u64;
        print!(
            "{}",
            tessel_runtime::jit::profile::render(&profile.times(), runs)
        );
    }
    write_safetensors(&args.outputs, &outputs).map_err(|e| e.to_string())
}

/// A [`Job`] whose per-replica program is compiled by the JIT, ready to run (again).
struct JitJob<'j> {
    job: &'j Job<'j>,
    exe: Executable,
    /// For a shard_map module: how global arrays split and assemble.
    sharded: Option<ShardMap>,
}

impl<'j> JitJob<'j> {
    /// Optimizes and compiles the program one replica runs. With N replicas, each replica's
    /// GEMM may use the budget's share `per_replica(N)` of threads, so N replicas do not
    /// oversubscribe the machine.
    /// `base` gives every option but the thread count.
    fn new(
        module: &Module,
        job: &'j Job<'j>,
        budget: &ThreadBudget,
        base: JitOptions,
    ) -> Result<Self, String> {
        let (sharded, replicas) = match job {
            Job::Single { .. } => (None, 1),
            Job::Sharded { replicas, .. } => (
                Some(ShardMap::new(module, *replicas).map_err(|e| e.to_string())?),
                *replicas,
            ),
            Job::Replicated { args, .. } => (None, args.len()),
        };
        let mut program = match &sharded {
            Some(s) => s.body().clone(),
            None => module.clone(),
        };
        tessel_compiler::compile::optimize(&mut program, &Default::default())
            .map_err(|e| e.to_string())?;
        let options = JitOptions {
            gemm_threads: budget.per_replica(replicas),
            ..base
        };
        let exe = tessel_runtime::jit::compile(&program, &options).map_err(|e| e.to_string())?;
        Ok(JitJob { job, exe, sharded })
    }

    fn run(&self) -> Result<Vec<(String, Array)>, String> {
        match (self.job, &self.sharded) {
            (Job::Single { args, .. }, _) => {
                let out = self.exe.run(args).map_err(|e| e.to_string())?;
                Ok(keyed(None, out.leaves().into_iter().cloned().collect()))
            }
            (Job::Sharded { args, .. }, Some(sharded)) => {
                let out = sharded.run(&self.exe, args).map_err(|e| e.to_string())?;
                Ok(keyed(None, out))
            }
            (Job::Replicated { args, .. }, _) => {
                let outs = self
                    .exe
                    .run_replicated(args.clone())
                    .map_err(|e| e.to_string())?;
                Ok(replica_outputs(&outs))
            }
            (Job::Sharded { .. }, None) => Err("a shard_map job without its split".into()),
        }
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// A module with its arguments, ready to run (again).
pub enum Job<'m> {
    /// One replica.
    Single {
        module: &'m Module,
        args: Vec<Literal>,
    },
    /// A shard_map module on N replicas with global arguments.
    Sharded {
        module: &'m Module,
        args: Vec<Array>,
        replicas: usize,
    },
    /// A per-replica module on N replicas: `args[r]` are replica r's arguments.
    Replicated {
        module: &'m Module,
        args: Vec<Vec<Literal>>,
    },
}

impl<'m> Job<'m> {
    pub fn new(
        module: &'m Module,
        inputs: Vec<(String, Array)>,
        replicas: usize,
    ) -> Result<Job<'m>, String> {
        let params = entry_parameters(module)?;
        if is_shard_map_module(module) {
            let mesh = Mesh::of_module(module).map_err(|e| e.to_string())?;
            if mesh.device_count() != replicas {
                return Err(format!(
                    "this shard_map module runs on {} replicas (its mesh {}); pass --replicas {}",
                    mesh.device_count(),
                    mesh.axes
                        .iter()
                        .map(|(n, s)| format!("\"{n}\"={s}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    mesh.device_count()
                ));
            }
            let args = match_inputs(&params, inputs)?;
            return Ok(Job::Sharded {
                module,
                args,
                replicas,
            });
        }
        if replicas == 1 {
            let args = match_inputs(&params, inputs)?
                .into_iter()
                .map(Literal::Array)
                .collect();
            return Ok(Job::Single { module, args });
        }
        let args = match_replica_inputs(&params, inputs, replicas)?;
        Ok(Job::Replicated { module, args })
    }

    /// Runs once; returns the outputs keyed as `tessel run` writes them.
    pub fn run(&self) -> Result<Vec<(String, Array)>, String> {
        let leaves = |l: &Literal| -> Vec<Array> { l.leaves().into_iter().cloned().collect() };
        match self {
            Job::Single { module, args } => {
                let out = evaluate(module, args).map_err(|e| e.to_string())?;
                Ok(keyed(None, leaves(&out)))
            }
            Job::Sharded {
                module,
                args,
                replicas,
            } => {
                let out = run_sharded(module, args, *replicas).map_err(|e| e.to_string())?;
                Ok(keyed(None, out))
            }
            Job::Replicated { module, args } => {
                let outs = evaluate_replicated(module, args.clone()).map_err(|e| e.to_string())?;
                Ok(replica_outputs(&outs))
            }
        }
    }
}

/// Every replica's result leaves keyed `"R/I"`.
fn replica_outputs(outs: &[Literal]) -> Vec<(String, Array)> {
    outs.iter()
        .enumerate()
        .flat_map(|(r, o)| keyed(Some(r), o.leaves().into_iter().cloned().collect()))
        .collect()
}

fn keyed(replica: Option<usize>, arrays: Vec<Array>) -> Vec<(String, Array)> {
    arrays
        .into_iter()
        .enumerate()
        .map(|(i, a)| match replica {
            Some(r) => (format!("{r}/{i}"), a),
            None => (i.to_string(), a),
        })
        .collect()
}

/// A shape as text without layout: `f32[2,3]`.
fn text(shape: &ArrayShape) -> String {
    Shape::Array(shape.clone()).to_text(false)
}

/// One entry parameter: its name and array shape.
pub struct Parameter {
    pub name: String,
    pub shape: ArrayShape,
}

fn entry_parameters(module: &Module) -> Result<Vec<Parameter>, String> {
    let e = module.entry();
    e.parameters()
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let p = e.get(id);
            match &p.shape {
                Shape::Array(a) => Ok(Parameter {
                    name: p.name.clone(),
                    shape: a.clone(),
                }),
                other => Err(format!(
                    "parameter {i} ({}) has shape {}, which cannot be read from a safetensors file",
                    p.name,
                    other.to_text(false)
                )),
            }
        })
        .collect()
}

fn check_input(key: &str, a: &Array, i: usize, p: &Parameter) -> Result<(), String> {
    if a.shape.element_type != p.shape.element_type || a.shape.dims != p.shape.dims {
        return Err(format!(
            "input \"{key}\" is {} but parameter {i} ({}) is {}",
            text(&a.shape),
            p.name,
            text(&p.shape)
        ));
    }
    Ok(())
}

fn describe_params(params: &[Parameter]) -> String {
    params
        .iter()
        .enumerate()
        .map(|(i, p)| format!("\"{i}\": {} {}", p.name, text(&p.shape)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The parameter number `index` names in input `key`, or an error listing the parameters.
fn parameter_index(key: &str, index: &str, params: &[Parameter]) -> Result<usize, String> {
    index
        .parse::<usize>()
        .ok()
        .filter(|&i| i < params.len())
        .ok_or_else(|| {
            format!(
                "extra input \"{key}\": the module has {} parameters ({})",
                params.len(),
                describe_params(params)
            )
        })
}

/// Inputs keyed "0".."N-1", one per parameter, each of the parameter's shape.
pub fn match_inputs(
    params: &[Parameter],
    inputs: Vec<(String, Array)>,
) -> Result<Vec<Array>, String> {
    let mut slots: Vec<Option<Array>> = vec![None; params.len()];
    for (key, a) in inputs {
        let i = parameter_index(&key, &key, params)?;
        check_input(&key, &a, i, &params[i])?;
        slots[i] = Some(a);
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            s.ok_or_else(|| {
                format!(
                    "missing input \"{i}\" for parameter {i} ({} {})",
                    params[i].name,
                    text(&params[i].shape)
                )
            })
        })
        .collect()
}

/// Per-replica inputs: `"I"` for every replica, `"R/I"` overriding it for replica R.
pub fn match_replica_inputs(
    params: &[Parameter],
    inputs: Vec<(String, Array)>,
    replicas: usize,
) -> Result<Vec<Vec<Literal>>, String> {
    let mut shared: Vec<Option<Array>> = vec![None; params.len()];
    let mut own: Vec<Vec<Option<Array>>> = vec![vec![None; params.len()]; replicas];
    for (key, a) in inputs {
        let (replica, index) = match key.split_once('/') {
            Some((r, i)) => (Some(r), i),
            None => (None, key.as_str()),
        };
        let i = parameter_index(&key, index, params)?;
        check_input(&key, &a, i, &params[i])?;
        match replica {
            None => shared[i] = Some(a),
            Some(r) => {
                let r = r.parse::<usize>().ok().filter(|&r| r < replicas).ok_or_else(|| {
                    format!("input \"{key}\" names a replica that does not run ({replicas} replicas)")
                })?;
                own[r][i] = Some(a);
            }
        }
    }
    own.into_iter()
        .enumerate()
        .map(|(r, slots)| {
            slots
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    s.or_else(|| shared[i].clone()).map(Literal::Array).ok_or_else(|| {
                        format!(
                            "missing input \"{i}\" (or \"{r}/{i}\") for parameter {i} ({} {}) of replica {r}",
                            params[i].name,
                            text(&params[i].shape)
                        )
                    })
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::ir::ElementType;

    fn params() -> Vec<Parameter> {
        vec![
            Parameter {
                name: "w.1".into(),
                shape: ArrayShape::new(ElementType::F32, &[2]),
            },
            Parameter {
                name: "x.1".into(),
                shape: ArrayShape::new(ElementType::S32, &[]),
            },
        ]
    }

    fn f(v: &[f32]) -> Array {
        Array::f32(&[v.len() as i64], v.to_vec())
    }

    #[test]
    fn inputs_are_matched_by_parameter_number() {
        let got = match_inputs(
            &params(),
            vec![
                ("1".into(), Array::scalar_s32(3)),
                ("0".into(), f(&[1., 2.])),
            ],
        )
        .unwrap();
        assert_eq!(got, vec![f(&[1., 2.]), Array::scalar_s32(3)]);
    }

    #[test]
    fn missing_extra_and_mismatched_inputs_are_explained() {
        let e = match_inputs(&params(), vec![("0".into(), f(&[1., 2.]))]).unwrap_err();
        assert!(
            e.contains("missing input \"1\"") && e.contains("x.1"),
            "{e}"
        );
        let e = match_inputs(
            &params(),
            vec![
                ("0".into(), f(&[1., 2.])),
                ("1".into(), Array::scalar_s32(3)),
                ("2".into(), f(&[1.])),
            ],
        )
        .unwrap_err();
        assert!(e.contains("extra input \"2\""), "{e}");
        let e = match_inputs(&params(), vec![("0".into(), f(&[1., 2., 3.]))]).unwrap_err();
        assert!(
            e.contains("f32[3]") && e.contains("w.1") && e.contains("f32[2]"),
            "{e}"
        );
        let e = match_inputs(&params(), vec![("1".into(), Array::scalar_f32(3.))]).unwrap_err();
        assert!(e.contains("f32[]") && e.contains("s32[]"), "{e}");
    }

    #[test]
    fn replica_inputs_override_shared_ones() {
        let got = match_replica_inputs(
            &params(),
            vec![
                ("0".into(), f(&[1., 2.])),
                ("1".into(), Array::scalar_s32(0)),
                ("1/1".into(), Array::scalar_s32(7)),
            ],
            2,
        )
        .unwrap();
        assert_eq!(got[0][1], Literal::Array(Array::scalar_s32(0)));
        assert_eq!(got[1][1], Literal::Array(Array::scalar_s32(7)));
        assert_eq!(got[1][0], Literal::Array(f(&[1., 2.])));
        let e = match_replica_inputs(&params(), vec![("5/0".into(), f(&[1., 2.]))], 2).unwrap_err();
        assert!(e.contains("does not run"), "{e}");
    }

    #[test]
    fn backends_are_named() {
        assert_eq!(Backend::parse("interp"), Ok(Backend::Interp));
        assert_eq!(Backend::parse("jit"), Ok(Backend::Jit));
        assert!(Backend::parse("gpu").unwrap_err().contains("gpu"));
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tessel-run-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn args(file: PathBuf, inputs: PathBuf, outputs: PathBuf, replicas: usize) -> RunArgs {
        RunArgs {
            file,
            inputs,
            outputs,
            backend: "interp".into(),
            replicas,
            loop_iterations: None,
            infeed: vec![],
            repeat: None,
            nan_check: false,
            infeed_depth: None,
            profile: false,
            conv_algorithm: ConvAlgorithm::Auto,
        }
    }

    #[test]
    fn per_replica_module_reads_shared_and_overridden_inputs() {
        let dir = temp_dir("replicas");
        let hlo = dir.join("m.hlo");
        std::fs::write(
            &hlo,
            "HloModule per_replica\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
             ENTRY main {\n  x = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(x), replica_groups={}, to_apply=add\n}\n",
        )
        .unwrap();
        let inputs = dir.join("in.safetensors");
        write_safetensors(
            &inputs,
            &[("0".into(), f(&[1., 2.])), ("1/0".into(), f(&[10., 20.]))],
        )
        .unwrap();
        let outputs = dir.join("out.safetensors");
        for backend in ["interp", "jit"] {
            let mut run = args(hlo.clone(), inputs.clone(), outputs.clone(), 2);
            run.backend = backend.into();
            execute(&run).unwrap();
            let mut out = read_safetensors(&outputs).unwrap();
            out.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(
                out,
                vec![
                    ("0/0".into(), f(&[11., 22.])),
                    ("1/0".into(), f(&[11., 22.]))
                ],
                "{backend}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_are_explained() {
        let dir = temp_dir("bad");
        let hlo = dir.join("m.hlo");
        std::fs::write(
            &hlo,
            "HloModule m\n\nENTRY main {\n  ROOT x = f32[2] parameter(0)\n}\n",
        )
        .unwrap();
        let not_tensors = dir.join("in.safetensors");
        std::fs::write(&not_tensors, b"not a tensor file").unwrap();
        let out = dir.join("out.safetensors");
        let e = execute(&args(hlo.clone(), not_tensors, out.clone(), 1)).unwrap_err();
        assert!(e.contains("not a safetensors file"), "{e}");
        let garbage = dir.join("bad.hlo");
        std::fs::write(&garbage, "HloModule m\nENTRY {").unwrap();
        let inputs = dir.join("ok.safetensors");
        write_safetensors(&inputs, &[("0".into(), f(&[1., 2.]))]).unwrap();
        assert!(execute(&args(garbage, inputs.clone(), out.clone(), 1)).is_err());
        let mut looped = args(hlo.clone(), inputs.clone(), out.clone(), 1);
        looped.loop_iterations = Some(3);
        looped.infeed = vec![7];
        let e = execute(&looped).unwrap_err();
        assert!(e.contains('7'), "{e}");
        execute(&args(hlo, inputs, out.clone(), 1)).unwrap();
        assert_eq!(
            read_safetensors(&out).unwrap(),
            vec![("0".into(), f(&[1., 2.]))]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
