//! The pass pipeline: passes in order, groups repeated to a fixed point, the verifier after
//! every pass, a timer per pass and a hook (for dumps) after every pass.

use super::buffer_assignment::{assign_buffers, BufferAssignment};
use super::stats::{fusion_count, kernel_count};
use super::{
    AlgebraicSimplifier, CallInliner, ConstantFolding, Cse, Dce, Fusion, Pass, PassError,
    Scheduler, WhileLoopSimplifier,
};
use crate::ir::Module;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Checks a module after a pass; the message says what is wrong.
pub type Verifier = Box<dyn Fn(&Module) -> Result<(), String>>;

/// Called after every pass run: the record of that run and the module as it left it.
pub type PassHook<'a> = &'a mut dyn FnMut(&PassRecord, &Module);

/// One run of one pass.
#[derive(Clone, Debug)]
pub struct PassRecord {
    /// The pass.
    pub pass: String,
    /// The fixed-point group it ran in, if any.
    pub group: Option<String>,
    pub changed: bool,
    pub duration: Duration,
}

enum Stage {
    Pass(Box<dyn Pass>),
    FixedPoint {
        name: String,
        passes: Vec<Box<dyn Pass>>,
        max_iterations: usize,
    },
}

pub struct Pipeline {
    pub name: String,
    stages: Vec<Stage>,
    verifier: Option<Verifier>,
}

impl Pipeline {
    pub fn new(name: impl Into<String>) -> Pipeline {
        Pipeline {
            name: name.into(),
            stages: Vec::new(),
            verifier: None,
        }
    }

    /// Runs `pass` once.
    pub fn add_pass(&mut self, pass: impl Pass + 'static) -> &mut Pipeline {
        self.stages.push(Stage::Pass(Box::new(pass)));
        self
    }

    /// Runs `passes` in order, again and again until none changes the module, at most
    /// `max_iterations` times.
    pub fn add_fixed_point(
        &mut self,
        name: impl Into<String>,
        passes: Vec<Box<dyn Pass>>,
        max_iterations: usize,
    ) -> &mut Pipeline {
        self.stages.push(Stage::FixedPoint {
            name: name.into(),
            passes,
            max_iterations,
        });
        self
    }

    /// Checks the module after every pass with `verifier`.
    pub fn set_verifier(&mut self, verifier: Verifier) -> &mut Pipeline {
        self.verifier = Some(verifier);
        self
    }

    /// The names of the passes, in order, with fixed-point groups as `name(a, b, ...)`.
    pub fn describe(&self) -> Vec<String> {
        self.stages
            .iter()
            .map(|s| match s {
                Stage::Pass(p) => p.name().to_string(),
                Stage::FixedPoint { name, passes, .. } => format!(
                    "{name}({})",
                    passes
                        .iter()
                        .map(|p| p.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
            .collect()
    }

    /// Runs the pipeline; `hook` sees the module after every pass run.
    pub fn run(
        &mut self,
        m: &mut Module,
        mut hook: Option<PassHook>,
    ) -> Result<Vec<PassRecord>, PassError> {
        let mut records = Vec::new();
        let verifier = self.verifier.as_ref();
        let mut run_one = |pass: &mut Box<dyn Pass>,
                           group: Option<&str>,
                           m: &mut Module,
                           records: &mut Vec<PassRecord>|
         -> Result<bool, PassError> {
            let start = Instant::now();
            let changed = pass.run(m)?;
            let record = PassRecord {
                pass: pass.name().to_string(),
                group: group.map(str::to_string),
                changed,
                duration: start.elapsed(),
            };
            if let Some(v) = verifier {
                v(m).map_err(|e| {
                    PassError::new(
                        pass.name(),
                        format!("module is invalid after this pass: {e}"),
                    )
                })?;
            }
            if let Some(h) = hook.as_mut() {
                h(&record, m);
            }
            records.push(record);
            Ok(changed)
        };
        for stage in &mut self.stages {
            match stage {
                Stage::Pass(p) => {
                    run_one(p, None, m, &mut records)?;
                }
                Stage::FixedPoint {
                    name,
                    passes,
                    max_iterations,
                } => {
                    for _ in 0..*max_iterations {
                        let mut any = false;
                        for p in passes.iter_mut() {
                            any |= run_one(p, Some(name), m, &mut records)?;
                        }
                        if !any {
                            break;
                        }
                    }
                }
            }
        }
        Ok(records)
    }
}

/// What `tessel compile` and the library callers ask of the pipeline.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Write `module_NNNN.NAME.*` dump files into this directory.
    pub dump_to: Option<PathBuf>,
    /// Dump only after passes whose name matches this regular expression.
    pub dump_pass_re: Option<String>,
    /// Replicas the module will run on (recorded in the report).
    pub replicas: usize,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            dump_to: None,
            dump_pass_re: None,
            replicas: 1,
        }
    }
}

/// What the pipeline did and what the optimized module needs.
#[derive(Clone, Debug)]
pub struct CompileReport {
    pub compile_time: Duration,
    pub instructions_before: usize,
    pub instructions_after: usize,
    pub kernels_before: usize,
    pub kernels_after: usize,
    pub fusions: usize,
    pub passes: Vec<PassRecord>,
    pub buffers: BufferAssignment,
}

impl CompileReport {
    /// `key: value` lines as `tessel compile` prints them.
    pub fn summary_lines(&self) -> Vec<String> {
        vec![
            format!("compile_ms: {:.3}", self.compile_time.as_secs_f64() * 1e3),
            format!("instructions_before: {}", self.instructions_before),
            format!("instructions_after: {}", self.instructions_after),
            format!("fusions: {}", self.fusions),
            format!("kernels_before: {}", self.kernels_before),
            format!("kernels: {}", self.kernels_after),
            format!("buffers_total_bytes: {}", self.buffers.total_bytes),
            format!("buffers_peak_bytes: {}", self.buffers.peak_bytes),
            format!(
                "buffers_lower_bound_bytes: {}",
                self.buffers.lower_bound_bytes
            ),
            format!("passes_run: {}", self.passes.len()),
            format!(
                "passes_changed: {}",
                self.passes.iter().filter(|p| p.changed).count()
            ),
        ]
    }
}

/// How many times the simplification group may repeat.
pub const SIMPLIFICATION_ITERATIONS: usize = 8;

/// XLA:CPU's order: a simplification fixed point (algebraic simplifier, DCE, while-loop
/// simplification, constant folding, call inlining), CSE, fusion, DCE, scheduling. Buffer
/// assignment runs after the pipeline (see [`optimize`]).
pub fn default_pipeline(_options: &CompileOptions) -> Pipeline {
    let mut p = Pipeline::new("optimize");
    p.add_fixed_point(
        "simplification",
        vec![
            Box::new(CallInliner),
            Box::new(AlgebraicSimplifier),
            Box::new(Dce),
            Box::new(WhileLoopSimplifier),
            Box::new(ConstantFolding::default()),
            Box::new(Cse),
            Box::new(Dce),
        ],
        SIMPLIFICATION_ITERATIONS,
    );
    p.add_pass(Fusion::default());
    p.add_pass(Dce);
    p.add_pass(Scheduler);
    p.set_verifier(Box::new(verify));
    p
}

/// The IR verifier with its errors joined into one message.
pub fn verify(m: &Module) -> Result<(), String> {
    crate::verifier::verify(m).map_err(|errors| {
        errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// Optimizes `m` in place with the default pipeline, assigns buffers, and writes dumps when
/// `opts.dump_to` is set.
pub fn optimize(m: &mut Module, opts: &CompileOptions) -> Result<CompileReport, PassError> {
    let start = Instant::now();
    let instructions_before = m.instruction_count();
    let kernels_before = kernel_count(m);
    let mut dumper = match &opts.dump_to {
        Some(dir) => Some(
            crate::dump::Dumper::new(dir, m, opts.dump_pass_re.as_deref())
                .map_err(|e| PassError::new("dump", e))?,
        ),
        None => None,
    };
    let mut pipeline = default_pipeline(opts);
    let mut dump_error: Option<String> = None;
    let passes = {
        let mut hook = |r: &PassRecord, m: &Module| {
            if let Some(d) = dumper.as_mut() {
                if let Err(e) = d.after_pass(r, m) {
                    dump_error.get_or_insert(e);
                }
            }
        };
        pipeline.run(m, Some(&mut hook))?
    };
    if let Some(e) = dump_error {
        return Err(PassError::new("dump", e));
    }
    let buffers = assign_buffers(m);
    let report = CompileReport {
        compile_time: start.elapsed(),
        instructions_before,
        instructions_after: m.instruction_count(),
        kernels_before,
        kernels_after: kernel_count(m),
        fusions: fusion_count(m),
        passes,
        buffers,
    };
    if let Some(d) = dumper.as_mut() {
        d.finish(m, &report.buffers)
            .map_err(|e| PassError::new("dump", e))?;
    }
    Ok(report)
}
