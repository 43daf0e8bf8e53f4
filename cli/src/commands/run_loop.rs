//! `tessel run STEP.hlo --loop K --infeed I,J,.. [--backend interp|jit]`: the step wrapped in
//! one compiled `while` of K iterations (see `docs/training_loops.md` and the session's
//! `LoopProgram`); `--repeat R` reruns the same compiled loop.
//!
//! Inputs: carried parameter I is `"I"` with the parameter's shape; fed parameter I is `"I"`
//! stacked K deep on a new leading axis. With `--replicas N`, `"R/I"` overrides `"I"` for
//! replica R. Outputs: the final carried values, then the per-iteration outputs stacked K
//! deep, keyed `"0"`, `"1"`, ... (`"R/I"` with several replicas). A shard_map step takes and
//! gives global arrays (`"I"`): its body loops on every replica, each fed its piece of the batch.

use super::run::RunArgs;
use super::session_errors::{describe, Verb};
use super::timing::Timing;
use std::time::Instant;
use tessel_compiler::ir::Module;
use tessel_runtime::host_io::read_safetensors;
use tessel_runtime::session::{compile_loop, Device, LoopOptions, LoopSpec};

/// Compiles and runs the loop (and the `--repeat` timings); writes the outputs.
pub fn run_loop(
    args: &RunArgs,
    step: &Module,
    device: &Device,
    iterations: usize,
    load_start: Instant,
) -> Result<(), String> {
    let describe = |e| describe(e, &args.file, Verb::Run);
    let spec = LoopSpec {
        iterations: iterations as u64,
        infeed: args.infeed.clone(),
    };
    let lp = compile_loop(step, &spec, device).map_err(describe)?;
    let compile_ms = load_start.elapsed().as_secs_f64() * 1e3;
    let inputs = read_safetensors(&args.inputs).map_err(|e| e.to_string())?;
    let inputs = lp.bind(inputs).map_err(describe)?;
    let options = LoopOptions {
        nan_check: args.nan_check,
        queue_depth: args
            .infeed_depth
            .unwrap_or(LoopOptions::default().queue_depth),
        ..LoopOptions::default()
    };
    let trace = super::trace_file::TraceRuns::new(args);
    trace.start(true, || lp.start_trace()).map_err(describe)?;
    let outputs = lp.run_bound(&inputs, &options).map_err(describe)?;
    trace.start(false, || lp.start_trace()).map_err(describe)?;
    let timing = Timing {
        repeat: args.repeat,
        compile_ms,
        iterations: Some(iterations),
        profile_rows: args.profile_rows,
    };
    timing.print(lp.profile(), || {
        lp.run_bound(&inputs, &options).map(drop).map_err(describe)
    })?;
    trace.finish(|| lp.take_trace())?;
    super::run_hosts::write_outputs(&args.outputs, &outputs.keyed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::hlo_text::parse_module;
    use tessel_compiler::ir::Array;
    use tessel_runtime::host_io::write_safetensors;
    use tessel_runtime::session::ConvAlgorithm;

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

    fn run(backend: &str, x: Vec<f32>) -> Result<Vec<(String, Array)>, String> {
        run_traced(backend, x, None, None).map(|(out, _)| out)
    }

    /// Keyed outputs, and the trace file's text when one was written.
    type Traced = (Vec<(String, Array)>, Option<String>);

    /// Runs the loop (with `--trace-dir` and `--repeat` when given); the outputs and the
    /// trace file's text.
    fn run_traced(
        backend: &str,
        x: Vec<f32>,
        trace: Option<&str>,
        repeat: Option<usize>,
    ) -> Result<Traced, String> {
        let dir = std::env::temp_dir().join(format!(
            "tessel-run-loop-{backend}-{}-{}-{}",
            std::process::id(),
            x.iter().any(|v| v.is_nan()),
            trace.unwrap_or("")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let hlo = dir.join("step.hlo");
        std::fs::write(&hlo, STEP).unwrap();
        parse_module(STEP, None).unwrap();
        let inputs = dir.join("in.safetensors");
        write_safetensors(
            &inputs,
            &[
                ("0".to_string(), Array::f32(&[3], vec![1.0, 2.0, -1.0])),
                ("1".to_string(), Array::f32(&[4, 3], x)),
            ],
        )
        .unwrap();
        let args = RunArgs {
            file: hlo,
            inputs,
            outputs: dir.join("out.safetensors"),
            backend: backend.into(),
            replicas: 1,
            loop_iterations: Some(4),
            infeed: vec![1],
            repeat,
            nan_check: true,
            infeed_depth: None,
            profile: false,
            profile_rows: 30,
            conv_algorithm: ConvAlgorithm::Auto,
            trace_dir: trace.map(|t| dir.join(t)),
            fast_allreduce: false,
        };
        let result = super::super::run::execute(&args).map(|()| {
            let written = args
                .trace_dir
                .as_ref()
                .map(|d| std::fs::read_to_string(d.join("step.trace.json")).unwrap());
            (read_safetensors(&args.outputs).unwrap(), written)
        });
        std::fs::remove_dir_all(&dir).unwrap();
        result
    }

    #[test]
    fn trace_dir_writes_the_runs_after_the_warm_up_when_repeated() {
        let x: Vec<f32> = (0..12).map(|i| 0.5 + i as f32 * 0.25).collect();
        for (repeat, runs) in [(None, 1), (Some(3), 3)] {
            let (out, trace) = run_traced("jit", x.clone(), Some("traces"), repeat).unwrap();
            assert_eq!(out, run("jit", x.clone()).unwrap());
            let trace = trace.unwrap();
            assert!(trace.starts_with(r#"{"displayTimeUnit":"ms""#), "{trace}");
            let spans = trace.matches(r#""name":"program run""#).count();
            assert_eq!(spans, runs, "--repeat {repeat:?}");
            // 4 iterations a run: 4 infeed dequeues and 4 host input batches.
            assert_eq!(trace.matches(r#""cat":"infeed""#).count(), 4 * runs);
            assert_eq!(trace.matches(r#""cat":"host input""#).count(), 4 * runs);
        }
        let e = run_traced("interp", x, Some("traces"), None).unwrap_err();
        assert!(
            e.contains("--trace-dir") && e.contains("--backend jit"),
            "{e}"
        );
    }

    #[test]
    fn the_jit_and_the_interpreter_give_the_same_loop() {
        let x: Vec<f32> = (0..12).map(|i| 0.5 + i as f32 * 0.25).collect();
        let jit = run("jit", x.clone()).unwrap();
        assert_eq!(jit, run("interp", x.clone()).unwrap());
        assert_eq!(jit[0].0, "0");
        assert_eq!(jit[1].1.shape.dims.as_slice(), &[4]);
        let w0: f32 = (0..4).map(|k| x[k * 3]).product();
        assert_eq!(jit[0].1.data.get_f64(0), w0 as f64);
    }

    #[test]
    fn the_nan_check_fails_the_jit_loop() {
        let mut x: Vec<f32> = vec![1.0; 12];
        x[7] = f32::NAN;
        let e = run("jit", x).unwrap_err();
        assert!(e.contains("NaN check: carried parameter 0 (w)"), "{e}");
    }
}
