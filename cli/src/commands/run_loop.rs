//! `tessel run STEP.hlo --loop K --infeed I,J,.. [--backend interp|jit]`: the step wrapped in
//! one compiled `while` of K iterations (see `docs/training_loops.md`). With `--backend jit`
//! the loop module is optimized and compiled once; `--repeat R` reruns the same executable.
//!
//! Inputs: carried parameter I is `"I"` with the parameter's shape; fed parameter I is `"I"`
//! stacked K deep on a new leading axis. With `--replicas N`, `"R/I"` overrides `"I"` for
//! replica R. Outputs: the final carried values, then the per-iteration outputs stacked K
//! deep, keyed `"0"`, `"1"`, ... (`"R/I"` with several replicas). A shard_map step takes and
//! gives global arrays (`"I"`): its body loops on every replica, each fed its piece of the batch.

use std::time::Instant;
use tessel_compiler::ir::{Array, Module, Shape};
use tessel_runtime::jit::profile::{render, ProfileCounters};
use tessel_runtime::jit::{ConvAlgorithm, JitOptions};
use tessel_runtime::shard_map::is_shard_map_module;
use tessel_runtime::sharded_loop::ShardedLoop;
use tessel_runtime::training_loop::{LoopBackend, LoopOptions, TrainingLoop};

/// What `tessel run` needs to know for a loop.
pub struct LoopRequest<'a> {
    pub iterations: usize,
    /// Run on the JIT (optimizer + Cranelift) instead of the interpreter.
    pub jit: bool,
    pub infeed: &'a [u32],
    pub replicas: usize,
    pub repeat: Option<usize>,
    pub nan_check: bool,
    /// Infeed queue depth per replica (`LoopOptions::default()`'s when not given).
    pub queue_depth: Option<usize>,
    /// With the JIT: print the time of every kernel and routine per iteration.
    pub profile: bool,
    /// With the JIT: which convolution routines it may use.
    pub conv_algorithm: ConvAlgorithm,
}

impl LoopRequest<'_> {
    fn loop_options(&self) -> LoopOptions {
        let default = LoopOptions::default();
        LoopOptions {
            nan_check: self.nan_check,
            queue_depth: self.queue_depth.unwrap_or(default.queue_depth),
        }
    }
}

/// Runs the loop (and `--repeat` timings); returns the outputs to write.
pub fn run_loop(
    step: &Module,
    inputs: Vec<(String, Array)>,
    req: &LoopRequest,
    load_start: Instant,
) -> Result<Vec<(String, Array)>, String> {
    let backend = if req.jit {
        LoopBackend::Jit(JitOptions {
            profile: req.profile,
            conv_algorithm: req.conv_algorithm,
            ..JitOptions::default()
        })
    } else {
        LoopBackend::Interpreter
    };
    if is_shard_map_module(step) {
        return run_sharded_loop(step, inputs, req, &backend, load_start);
    }
    let lp = TrainingLoop::with_backend(step, req.iterations as u64, req.infeed, &backend)?;
    let compile_ms = load_start.elapsed().as_secs_f64() * 1e3;
    let args = loop_inputs(step, &lp, inputs, req.replicas)?;
    let options = req.loop_options();
    let out = lp.run(args.clone(), &options).map_err(|e| e.to_string())?;
    let profile = lp.executable().and_then(|exe| exe.profile());
    time_and_profile(req, compile_ms, profile, || {
        lp.run(args.clone(), &options)
            .map(drop)
            .map_err(|e| e.to_string())
    })?;
    let key = |r: usize, i: usize| {
        if req.replicas == 1 {
            i.to_string()
        } else {
            format!("{r}/{i}")
        }
    };
    Ok((0..req.replicas)
        .flat_map(|r| {
            out.replica_outputs(r)
                .into_iter()
                .enumerate()
                .map(move |(i, a)| (key(r, i), a))
        })
        .collect())
}

/// A shard_map step: global inputs and outputs, the body looping on every replica.
fn run_sharded_loop(
    step: &Module,
    inputs: Vec<(String, Array)>,
    req: &LoopRequest,
    backend: &LoopBackend,
    load_start: Instant,
) -> Result<Vec<(String, Array)>, String> {
    let sl = ShardedLoop::new(
        step,
        req.replicas,
        req.iterations as u64,
        req.infeed,
        backend,
    )?;
    let compile_ms = load_start.elapsed().as_secs_f64() * 1e3;
    // Global inputs: one set, keyed "I".
    let args = loop_inputs(step, &sl.body_loop, inputs, 1)?.remove(0);
    let options = req.loop_options();
    let out = sl.run(args.clone(), &options)?;
    let profile = sl.body_loop.executable().and_then(|exe| exe.profile());
    time_and_profile(req, compile_ms, profile, || {
        sl.run(args.clone(), &options).map(drop)
    })?;
    Ok(out
        .into_iter()
        .enumerate()
        .map(|(i, a)| (i.to_string(), a))
        .collect())
}

/// With `--repeat R`: runs the loop R more times and prints compile_ms, run_ms_median and
/// loop_ms_per_iteration. With `--profile` (JIT): prints the per-kernel table per iteration,
/// leaving out the warm-up run already made when R is given.
fn time_and_profile(
    req: &LoopRequest,
    compile_ms: f64,
    profile: Option<&ProfileCounters>,
    mut run: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    if let (Some(profile), Some(_)) = (profile, req.repeat) {
        profile.reset();
    }
    if let Some(repeat) = req.repeat {
        let mut times = Vec::with_capacity(repeat);
        for _ in 0..repeat {
            let start = Instant::now();
            run()?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!("compile_ms: {compile_ms:.3}");
        println!("run_ms_median: {median:.3}");
        println!(
            "loop_ms_per_iteration: {:.3}",
            median / req.iterations as f64
        );
    }
    if let Some(profile) = profile {
        let iterations = req.repeat.unwrap_or(1) * req.iterations;
        println!("per iteration:");
        print!("{}", render(&profile.times(), iterations as u64));
    }
    Ok(())
}

/// Each replica's step arguments in parameter order (fed ones stacked K deep), from inputs
/// keyed `"I"` or `"R/I"`.
fn loop_inputs(
    step: &Module,
    lp: &TrainingLoop,
    inputs: Vec<(String, Array)>,
    replicas: usize,
) -> Result<Vec<Vec<Array>>, String> {
    let e = step.entry();
    let params: Vec<Shape> = e
        .parameters()
        .into_iter()
        .map(|p| e.get(p).shape.clone())
        .collect();
    for (key, _) in &inputs {
        let index = key.rsplit('/').next().unwrap_or(key);
        let replica_ok = match key.split_once('/') {
            Some((r, _)) => r.parse::<usize>().is_ok_and(|r| r < replicas),
            None => true,
        };
        if !replica_ok || !index.parse::<usize>().is_ok_and(|i| i < params.len()) {
            return Err(format!(
                "extra input \"{key}\": the step has {} parameters and {replicas} replicas run",
                params.len()
            ));
        }
    }
    let k = lp.signature.iterations as i64;
    (0..replicas)
        .map(|r| {
            (0..params.len())
                .map(|i| {
                    let own = format!("{r}/{i}");
                    let shared = i.to_string();
                    let a = inputs
                        .iter()
                        .find(|(key, _)| *key == own)
                        .or_else(|| inputs.iter().find(|(key, _)| *key == shared))
                        .map(|(_, a)| a.clone())
                        .ok_or_else(|| {
                            format!(
                                "missing input \"{i}\" for parameter {i} ({})",
                                lp.parameter_names[i]
                            )
                        })?;
                    let fed = lp.signature.fed.contains(&(i as u32));
                    let want = params[i]
                        .as_array()
                        .ok_or("tuple parameters cannot be fed")?;
                    let mut dims: Vec<i64> = want.dims.to_vec();
                    if fed {
                        dims.insert(0, k);
                    }
                    if a.shape.element_type != want.element_type || a.shape.dims[..] != dims[..] {
                        return Err(format!(
                            "input \"{i}\" is {}{:?} but parameter {i} ({}) needs {}{dims:?}{}",
                            a.shape.element_type,
                            a.shape.dims,
                            lp.parameter_names[i],
                            want.element_type,
                            if fed {
                                format!(" (fed: stacked {k} deep)")
                            } else {
                                String::new()
                            }
                        ));
                    }
                    Ok(a)
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::hlo_text::parse_module;

    /// w <- w * x per iteration; the per-iteration output is the sum of w * x.
    const STEP: &str = r#"HloModule scale

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY step {
  w = f32[3] parameter(0)
  x = f32[3] parameter(1)
  m = f32[3] multiply(w, x)
  z = f32[] constant(0)
  total = f32[] reduce(m, z), dimensions={0}, to_apply=add_f32
  ROOT t = (f32[3], f32[]) tuple(m, total)
}
"#;

    fn run(jit: bool, x: Vec<f32>) -> Result<Vec<(String, Array)>, String> {
        let step = parse_module(STEP, None).unwrap();
        let inputs = vec![
            ("0".to_string(), Array::f32(&[3], vec![1.0, 2.0, -1.0])),
            ("1".to_string(), Array::f32(&[4, 3], x)),
        ];
        let req = LoopRequest {
            iterations: 4,
            jit,
            infeed: &[1],
            replicas: 1,
            repeat: None,
            nan_check: true,
            queue_depth: None,
            profile: false,
            conv_algorithm: ConvAlgorithm::Auto,
        };
        run_loop(&step, inputs, &req, Instant::now())
    }

    #[test]
    fn the_jit_and_the_interpreter_give_the_same_loop() {
        let x: Vec<f32> = (0..12).map(|i| 0.5 + i as f32 * 0.25).collect();
        let jit = run(true, x.clone()).unwrap();
        assert_eq!(jit, run(false, x.clone()).unwrap());
        assert_eq!(jit[0].0, "0");
        assert_eq!(jit[1].1.shape.dims.as_slice(), &[4]);
        let w0: f32 = (0..4).map(|k| x[k * 3]).product();
        assert_eq!(jit[0].1.data.get_f64(0), w0 as f64);
    }

    #[test]
    fn the_nan_check_fails_the_jit_loop() {
        let mut x: Vec<f32> = vec![1.0; 12];
        x[7] = f32::NAN;
        let e = run(true, x).unwrap_err();
        assert!(e.contains("NaN check: carried parameter 0 (w)"), "{e}");
    }
}
