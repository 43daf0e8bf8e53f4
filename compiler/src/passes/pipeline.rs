//! The pass pipeline: passes in order, groups repeated to a fixed point, the verifier after
//! every pass that changed the module (as XLA's pipeline runs its invariant checkers), a
//! timer per pass and a hook (for dumps) after every pass.

use super::{
    AlgebraicSimplifier, AllReduceCombiner, CallInliner, ConstantFolding, Cse, Dce, Fusion, Pass,
    PassError, Scheduler, ThreefryRounds, WhileLoopSimplifier, WhileLoopUnroller,
};
use crate::ir::Module;
use crate::verifier::VerifyError;
use std::time::{Duration, Instant};

/// Checks a module after a pass; the errors say what is wrong (every problem found).
pub(crate) type Verifier = Box<dyn Fn(&Module) -> Result<(), Vec<VerifyError>>>;

/// Called after every pass run: the record of that run and the module as it left it.
pub(crate) type PassHook<'a> = &'a mut dyn FnMut(&PassRecord, &Module);

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
    /// Passes skipped wherever they stand (see [`Pipeline::disable`]).
    disabled: Vec<String>,
}

impl Pipeline {
    pub fn new(name: impl Into<String>) -> Pipeline {
        Pipeline {
            name: name.into(),
            stages: Vec::new(),
            verifier: None,
            disabled: Vec::new(),
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

    /// Checks the module with `verifier` after every pass that changed it. A pass that reports
    /// no change left the module as the last check saw it; on ResNet-20's training loop,
    /// checking only after changes takes 8 of the 22 checks (each about 2.6 ms).
    pub fn set_verifier(&mut self, verifier: Verifier) -> &mut Pipeline {
        self.verifier = Some(verifier);
        self
    }

    /// Skips the passes named `names` wherever they stand (XLA's `--xla_disable_hlo_passes`).
    /// A name that is not one of the pipeline's passes is an error.
    pub fn disable(&mut self, names: &[String]) -> Result<&mut Pipeline, PassError> {
        let known: Vec<&'static str> = self
            .stages
            .iter()
            .flat_map(|s| match s {
                Stage::Pass(p) => vec![p.name()],
                Stage::FixedPoint { passes, .. } => passes.iter().map(|p| p.name()).collect(),
            })
            .collect();
        for name in names {
            if !known.contains(&name.as_str()) {
                return Err(PassError::new(
                    name.clone(),
                    format!(
                        "cannot disable it: pipeline {} has no such pass (it has {})",
                        self.name,
                        known.join(", ")
                    ),
                ));
            }
        }
        self.disabled.extend(names.iter().cloned());
        Ok(self)
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
        let disabled = &self.disabled;
        let mut run_one = |pass: &mut Box<dyn Pass>,
                           group: Option<&str>,
                           m: &mut Module,
                           records: &mut Vec<PassRecord>|
         -> Result<bool, PassError> {
            if disabled.iter().any(|d| d == pass.name()) {
                return Ok(false);
            }
            let start = Instant::now();
            let changed = pass.run(m)?;
            let record = PassRecord {
                pass: pass.name().to_string(),
                group: group.map(str::to_string),
                changed,
                duration: start.elapsed(),
            };
            if let Some(v) = verifier.filter(|_| changed) {
                v(m).map_err(|errors| {
                    PassError::new(
                        pass.name(),
                        format!(
                            "module is invalid after this pass: {}",
                            crate::verifier::join(&errors)
                        ),
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

/// How many times the simplification group may repeat.
pub(crate) const SIMPLIFICATION_ITERATIONS: usize = 8;

/// XLA:CPU's order: a simplification fixed point (small loops unrolled, call inlining,
/// algebraic simplifier, DCE, while-loop simplification, constant folding, CSE), Threefry's
/// rounds as one call ([`ThreefryRounds`], tessel's own), DCE, all-reduce combining, fusion,
/// DCE, scheduling. Buffer assignment runs after the pipeline (see
/// `crate::compile::optimize`).
pub(crate) fn default_pipeline() -> Pipeline {
    let mut p = Pipeline::new("optimize");
    p.add_fixed_point(
        "simplification",
        vec![
            Box::new(WhileLoopUnroller),
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
    p.add_pass(ThreefryRounds);
    p.add_pass(Dce);
    p.add_pass(AllReduceCombiner::default());
    p.add_pass(Fusion::default());
    p.add_pass(Dce);
    p.add_pass(Scheduler);
    p.set_verifier(Box::new(verify));
    p
}

/// The IR verifier ([`crate::verifier::verify`]), the pipelines' default [`Verifier`].
pub fn verify(m: &Module) -> Result<(), Vec<VerifyError>> {
    crate::verifier::verify(m)
}
