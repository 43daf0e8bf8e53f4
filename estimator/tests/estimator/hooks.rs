//! Hooks around the compiled loops: a user's hook that stops training, one that reads the
//! outfed loss, the moments in order, checkpoint listeners, a hook's error, and the spec's
//! hooks in train, evaluate and predict.

use crate::support::tiny::{self, checkpoint_steps, config, estimator, temp_dir};
use std::sync::{Arc, Mutex};
use tessel_compiler::trace::Tensor;
use tessel_estimator::estimator::Features;
use tessel_estimator::hooks::{CheckpointSaverListener, Hook, RunContext, RunValues};
use tessel_estimator::{
    EstimatorError, Graph, Mode, Params, RunConfig, TpuEstimator, TpuEstimatorSpec,
};

type Calls = Arc<Mutex<Vec<String>>>;

/// Records each moment with the global step it sees; requests a stop once the global step
/// reaches `stop_at`.
struct Recorder {
    calls: Calls,
    stop_at: Option<i64>,
    losses: Arc<Mutex<Vec<f64>>>,
}

impl Recorder {
    fn new(calls: &Calls) -> Recorder {
        Recorder {
            calls: Arc::clone(calls),
            stop_at: None,
            losses: Arc::default(),
        }
    }

    fn note(&self, what: String) {
        self.calls.lock().unwrap().push(what);
    }
}

impl Hook for Recorder {
    fn begin(&mut self, _ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.note("begin".into());
        Ok(())
    }

    fn after_create_session(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.note(format!("after_create_session {}", ctx.global_step()));
        Ok(())
    }

    fn before_run(
        &mut self,
        ctx: &mut RunContext,
    ) -> Result<tessel_estimator::hooks::RunArgs, EstimatorError> {
        self.note(format!("before_run {}", ctx.global_step()));
        Ok(Default::default())
    }

    fn after_run(
        &mut self,
        ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        self.note(format!("after_run {}", values.global_step()));
        self.losses.lock().unwrap().extend(values.loss());
        if self.stop_at.is_some_and(|at| values.global_step() >= at) {
            ctx.request_stop();
        }
        Ok(())
    }

    fn end(&mut self, ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.note(format!("end {}", ctx.global_step()));
        Ok(())
    }
}

#[test]
fn a_user_hook_stops_training_at_the_loop_boundary_after_its_step() {
    let dir = temp_dir("hook_stop");
    let calls = Calls::default();
    let mut hook = Recorder::new(&calls);
    hook.stop_at = Some(12);
    let r = estimator(config(&dir, 5, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(100),
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    // Loops end at 5, 10, 15: the first boundary at or past 12.
    assert_eq!(r.global_step, 15);
    assert_eq!(checkpoint_steps(&dir), vec![0, 15]);
    assert_eq!(
        *calls.lock().unwrap(),
        [
            "begin",
            "after_create_session 0",
            "before_run 0",
            "after_run 5",
            "before_run 5",
            "after_run 10",
            "before_run 10",
            "after_run 15",
            "end 15",
        ]
    );
    // The next train resumes from the checkpoint the stop saved.
    let again = estimator(config(&dir, 5, 1000), Params::new())
        .train(tiny::train_input, Some(5), None)
        .unwrap();
    assert_eq!(again.global_step, 20);
}

#[test]
fn a_user_hook_reads_the_outfed_loss_of_every_step() {
    let dir = temp_dir("hook_loss");
    let calls = Calls::default();
    let hook = Recorder::new(&calls);
    let losses = Arc::clone(&hook.losses);
    let r = estimator(config(&dir, 4, 1000), Params::new())
        .train_with_hooks(
            tiny::train_input,
            Some(10),
            None,
            vec![Box::new(hook)],
            vec![],
        )
        .unwrap();
    let losses = losses.lock().unwrap();
    // Loops of 4, 4 and the shortened 2: every step's loss, the last the one reported.
    assert_eq!(losses.len(), 10);
    assert_eq!(losses.last().copied(), r.final_loss);
    assert!(losses.iter().all(|l| l.is_finite() && *l > 0.0));
    assert!(losses[0] != losses[9]);
}

/// A hook's error ends training at once: `end` is not called and no checkpoint of the
/// failed loop is written.
struct FailAt(i64);

impl Hook for FailAt {
    fn after_run(
        &mut self,
        _ctx: &mut RunContext,
        values: &RunValues,
    ) -> Result<(), EstimatorError> {
        if values.global_step() >= self.0 {
            return Err(EstimatorError::Value(format!(
                "refused at step {}",
                values.global_step()
            )));
        }
        Ok(())
    }
}

#[test]
fn a_hooks_error_stops_training_and_keeps_the_last_checkpoint() {
    let dir = temp_dir("hook_error");
    let e = estimator(config(&dir, 5, 5), Params::new())
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(30),
            vec![Box::new(FailAt(12))],
            vec![],
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "refused at step 15");
    // The checkpoint hook runs after the user's: 15 is not saved.
    assert_eq!(checkpoint_steps(&dir), vec![0, 5, 10]);
    let r = estimator(config(&dir, 5, 5), Params::new())
        .train(tiny::train_input, None, Some(20))
        .unwrap();
    assert_eq!(r.global_step, 20);
}

/// Records the listener's calls; requests a stop after the save of `stop_after`.
struct Listener {
    calls: Calls,
    stop_after: Option<i64>,
}

impl CheckpointSaverListener for Listener {
    fn begin(&mut self, _ctx: &mut RunContext) -> Result<(), EstimatorError> {
        self.calls.lock().unwrap().push("begin".into());
        Ok(())
    }

    fn before_save(&mut self, _ctx: &mut RunContext, step: i64) -> Result<(), EstimatorError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("before_save {step}"));
        Ok(())
    }

    fn after_save(&mut self, ctx: &mut RunContext, step: i64) -> Result<(), EstimatorError> {
        let file = ctx
            .model_dir()
            .join(format!("model.ckpt-{step}.safetensors"));
        self.calls
            .lock()
            .unwrap()
            .push(format!("after_save {step} {}", file.exists()));
        if self.stop_after == Some(step) {
            ctx.request_stop();
        }
        Ok(())
    }

    fn end(&mut self, _ctx: &mut RunContext, step: i64) -> Result<(), EstimatorError> {
        self.calls.lock().unwrap().push(format!("end {step}"));
        Ok(())
    }
}

#[test]
fn checkpoint_listeners_are_told_around_each_save_and_may_stop_training() {
    let dir = temp_dir("hook_listeners");
    let calls = Calls::default();
    let listener = Listener {
        calls: Arc::clone(&calls),
        stop_after: None,
    };
    estimator(config(&dir, 5, 10), Params::new())
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(25),
            vec![],
            vec![Box::new(listener)],
        )
        .unwrap();
    assert_eq!(
        *calls.lock().unwrap(),
        [
            "begin",
            "before_save 0",
            "after_save 0 true",
            "before_save 10",
            "after_save 10 true",
            "before_save 20",
            "after_save 20 true",
            "before_save 25",
            "after_save 25 true",
            "end 25",
        ]
    );

    // TF's `after_save` returning True: training stops after that save.
    let dir = temp_dir("hook_listener_stop");
    let listener = Listener {
        calls: Calls::default(),
        stop_after: Some(10),
    };
    let r = estimator(config(&dir, 5, 10), Params::new())
        .train_with_hooks(
            tiny::train_input,
            None,
            Some(100),
            vec![],
            vec![Box::new(listener)],
        )
        .unwrap();
    assert_eq!(r.global_step, 10);
    assert_eq!(checkpoint_steps(&dir), vec![0, 10]);
}

/// The tiny model_fn with a [`Recorder`] in the spec's hooks of every mode (and a
/// prediction for PREDICT).
fn model_fn_with_hooks(
    calls: Calls,
) -> impl Fn(
    &mut Graph,
    &Features,
    Option<&Tensor>,
    Mode,
    &Params,
) -> Result<TpuEstimatorSpec, EstimatorError>
       + Send
       + Sync
       + 'static {
    move |g, features, labels, mode, params| {
        let tag = match mode {
            Mode::Train => "train",
            Mode::Eval => "eval",
            Mode::Predict => "predict",
        };
        let hook = Recorder::new(&calls);
        hook.note(format!("{tag} traced"));
        let mut spec = if mode == Mode::Predict {
            let mut s = TpuEstimatorSpec::new(mode);
            s.predictions = vec![("x".into(), features["x"].clone())];
            s
        } else {
            tiny::model_fn(g, features, labels, mode, params)?
        };
        let hook: Box<dyn Hook> = Box::new(hook);
        match mode {
            Mode::Train => spec.training_hooks.push(hook),
            Mode::Eval => spec.evaluation_hooks.push(hook),
            Mode::Predict => spec.prediction_hooks.push(hook),
        }
        Ok(spec)
    }
}

fn estimator_with_spec_hooks(config: RunConfig, calls: &Calls) -> TpuEstimator {
    TpuEstimator::new(
        model_fn_with_hooks(Arc::clone(calls)),
        config,
        Params::new(),
        false,
        8,
        Some(8),
        Some(8),
    )
    .unwrap()
    .quiet()
}

#[test]
fn the_specs_hooks_run_in_train_evaluate_and_predict() {
    let dir = temp_dir("hook_spec");
    let calls = Calls::default();
    let est = estimator_with_spec_hooks(config(&dir, 5, 1000), &calls);
    est.train(tiny::train_input, Some(10), None).unwrap();
    let seen = std::mem::take(&mut *calls.lock().unwrap());
    assert_eq!(
        seen,
        [
            "train traced",
            "begin",
            "after_create_session 0",
            "before_run 0",
            "after_run 5",
            "before_run 5",
            "after_run 10",
            "end 10"
        ]
    );
    // Evaluation: 12 batches in loops of 5.
    let e = est.evaluate(tiny::eval_input, None).unwrap();
    assert_eq!(e.steps, 12);
    let seen = std::mem::take(&mut *calls.lock().unwrap());
    assert_eq!(
        seen,
        [
            "eval traced",
            "begin",
            "after_create_session 10",
            "before_run 10",
            "after_run 10",
            "before_run 10",
            "after_run 10",
            "before_run 10",
            "after_run 10",
            "end 10"
        ]
    );
    let n = est.predict(tiny::eval_input, None).unwrap().count();
    assert_eq!(n, 96);
    let seen = std::mem::take(&mut *calls.lock().unwrap());
    assert_eq!(
        seen[..3],
        ["predict traced", "begin", "after_create_session 10"]
    );
    // 12 batches: loops of 5, 5, 2, then the input's end.
    let runs = seen.iter().filter(|c| c.starts_with("after_run")).count();
    assert_eq!(runs, 3, "{seen:?}");
    assert_eq!(seen.last().unwrap(), "end 10");
}

#[test]
fn an_evaluation_hook_ends_evaluation_early_and_the_result_says_how_far() {
    let dir = temp_dir("hook_eval_stop");
    let est = estimator(config(&dir, 4, 1000), Params::new());
    est.train(tiny::train_input, Some(4), None).unwrap();
    let calls = Calls::default();
    let mut hook = Recorder::new(&calls);
    // The global step evaluated is 4: a stop after the first loop.
    hook.stop_at = Some(4);
    let losses = Arc::clone(&hook.losses);
    let e = est
        .evaluate_with_hooks(tiny::eval_input, None, vec![Box::new(hook)])
        .unwrap();
    assert_eq!(e.steps, 4);
    assert_eq!(e.examples, 32);
    let losses = losses.lock().unwrap();
    assert_eq!(losses.len(), 4);
    // The result's loss is the mean of the steps' losses (every batch full).
    let mean = losses.iter().sum::<f64>() / 4.0;
    assert!((mean - e.loss).abs() < 1e-6, "{mean} vs {}", e.loss);
}
