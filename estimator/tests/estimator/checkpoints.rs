//! Checkpoints in the model_dir (the `checkpoint` state file, keep_checkpoint_max,
//! save_checkpoints_steps cadence, the final checkpoint, no temporary files, restoring a
//! changed model) and TF's errors, word for word.

use crate::support::tiny::{self, checkpoint_steps, config, estimator, files, temp_dir};
use tessel_estimator::{EstimatorError, Params, RunConfig, TpuConfig, TpuEstimator};

fn saved_steps(log: &[String]) -> Vec<i64> {
    log.iter()
        .filter_map(|l| {
            l.strip_prefix("Saving checkpoints for ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// Nothing but checkpoints, the state file and event files: no `.tmp` leftovers.
fn assert_clean(dir: &std::path::Path) {
    for f in files(dir) {
        assert!(
            f == "checkpoint"
                || f == "trainer.lock"
                || (f.starts_with("model.ckpt-") && f.ends_with(".safetensors"))
                || f.starts_with("events.out.tfevents.")
                || f == "eval",
            "unexpected file {f} in {}",
            dir.display()
        );
    }
}

#[test]
fn state_file_keep_max_and_cadence() {
    let dir = temp_dir("ckpt_cadence");
    let mut c = config(&dir, 30, 20);
    c.keep_checkpoint_max = 3;
    let r = estimator(c, Params::new())
        .train(tiny::train_input, None, Some(100))
        .unwrap();
    // Step 0 (a fresh model_dir), then at the end of each loop of 30 that passes a multiple
    // of 20 (30 passes 20; 60 passes 40 and 60; 90 passes 80), and always at the end (100).
    assert_eq!(saved_steps(&r.log), vec![0, 30, 60, 90, 100]);
    let line = format!(
        "Saving checkpoints for 100 into {}.",
        dir.join("model.ckpt").display()
    );
    assert!(r.log.contains(&line), "{:?}", r.log);
    // keep_checkpoint_max = 3 keeps the newest three and deletes the older files.
    assert_eq!(checkpoint_steps(&dir), vec![60, 90, 100]);
    assert_eq!(
        std::fs::read_to_string(dir.join("checkpoint")).unwrap(),
        "model_checkpoint_path: \"model.ckpt-100\"\n\
         all_model_checkpoint_paths: \"model.ckpt-60\"\n\
         all_model_checkpoint_paths: \"model.ckpt-90\"\n\
         all_model_checkpoint_paths: \"model.ckpt-100\"\n"
    );
    assert_clean(&dir);

    // A second call continues the list and the cadence from the restored step.
    let mut c = config(&dir, 30, 20);
    c.keep_checkpoint_max = 3;
    let r = estimator(c, Params::new())
        .train(tiny::train_input, Some(25), None)
        .unwrap();
    assert_eq!(saved_steps(&r.log), vec![125]);
    assert_eq!(checkpoint_steps(&dir), vec![90, 100, 125]);
    assert_clean(&dir);
}

#[test]
fn keep_zero_keeps_all_and_a_final_checkpoint_is_always_written() {
    let dir = temp_dir("ckpt_keep_all");
    let mut c = config(&dir, 7, 1000);
    c.keep_checkpoint_max = 0;
    let r = estimator(c, Params::new())
        .train(tiny::train_input, None, Some(10))
        .unwrap();
    // The interval (1000) is never reached: only the first and the final checkpoints.
    assert_eq!(saved_steps(&r.log), vec![0, 10]);
    assert_eq!(checkpoint_steps(&dir), vec![0, 10]);
    assert_clean(&dir);
}

#[test]
fn restoring_a_changed_model_names_the_variable_and_both_shapes() {
    let dir = temp_dir("ckpt_changed");
    estimator(config(&dir, 5, 1000), Params::new())
        .train(tiny::train_input, None, Some(5))
        .unwrap();
    let before = std::fs::read(dir.join("model.ckpt-5.safetensors")).unwrap();
    let e = estimator(config(&dir, 5, 1000), Params::new().with("hidden", 17))
        .train(tiny::train_input, None, Some(10))
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, EstimatorError::Restore { .. }), "{text}");
    assert!(
        text.contains("model.ckpt-5.safetensors")
            && text.contains("`dense/kernel`")
            && text.contains("f32[8,16]")
            && text.contains("f32[8,17]"),
        "{text}"
    );
    // Nothing was written over the checkpoint.
    assert_eq!(
        std::fs::read(dir.join("model.ckpt-5.safetensors")).unwrap(),
        before
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 5]);
}

fn value_error(e: EstimatorError) -> String {
    e.to_string()
}

#[test]
fn tf_errors_word_for_word() {
    let dir = temp_dir("errors");
    let est = estimator(config(&dir, 5, 1000), Params::new());
    let err = |steps, max| value_error(est.train(tiny::train_input, steps, max).unwrap_err());
    assert_eq!(
        err(Some(5), Some(5)),
        "Can not provide both steps and max_steps."
    );
    assert_eq!(err(Some(0), None), "Must specify steps > 0, given: 0");
    assert_eq!(err(None, Some(0)), "Must specify max_steps > 0, given: 0");
    // None of that touched the model_dir.
    assert!(files(&dir).is_empty(), "{:?}", files(&dir));

    // The batch size must divide by the replicas.
    let three = RunConfig {
        tpu_config: TpuConfig {
            num_shards: Some(3),
            ..TpuConfig::default()
        },
        ..config(&dir, 5, 1000)
    };
    let e = TpuEstimator::new(
        tiny::model_fn,
        three.clone(),
        Params::new(),
        true,
        100,
        None,
        None,
    )
    .err()
    .unwrap();
    assert_eq!(
        e.to_string(),
        "train batch size 100 must be divisible by number of replicas 3"
    );
    let e = TpuEstimator::new(
        tiny::model_fn,
        three,
        Params::new(),
        true,
        99,
        Some(100),
        None,
    )
    .err()
    .unwrap();
    assert_eq!(
        e.to_string(),
        "eval batch size 100 must be divisible by number of replicas 3"
    );

    // Reserved params keys: TF prints the whole reserved list and the params dict.
    let e = TpuEstimator::new(
        tiny::model_fn,
        config(&dir, 5, 1000),
        Params::new().with("batch_size", 128).with("lr", 1.0),
        false,
        8,
        None,
        None,
    )
    .err()
    .unwrap();
    assert_eq!(
        e.to_string(),
        "['batch_size', 'context'] are reserved keys but existed in params {'batch_size': 128, 'lr': 1.0}."
    );

    // Both checkpoint intervals.
    let mut both = config(&dir, 5, 1000);
    both.save_checkpoints_secs = Some(60);
    let e = TpuEstimator::new(tiny::model_fn, both, Params::new(), false, 8, None, None)
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set."
    );
}

#[test]
fn two_shards_without_cross_shard_optimizer_is_tfs_error() {
    let dir = temp_dir("no_cross_shard");
    let two = RunConfig {
        tpu_config: TpuConfig {
            num_shards: Some(2),
            iterations_per_loop: 5,
            ..TpuConfig::default()
        },
        ..config(&dir, 5, 1000)
    };
    let e = estimator(two, Params::new().with("no_cross_shard", true))
        .train(tiny::train_input, None, Some(10))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "CrossShardOptimizer must be used for model training on TPUs."
    );
    assert!(checkpoint_steps(&dir).is_empty());
}

#[test]
fn max_steps_already_reached_skips_training() {
    let dir = temp_dir("skip");
    estimator(config(&dir, 5, 1000), Params::new())
        .train(tiny::train_input, None, Some(10))
        .unwrap();
    let before: Vec<(String, std::time::SystemTime)> = files(&dir)
        .into_iter()
        .map(|f| {
            let m = std::fs::metadata(dir.join(&f)).unwrap().modified().unwrap();
            (f, m)
        })
        .collect();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    for max in [10, 3] {
        let r = estimator(config(&dir, 5, 1000), Params::new())
            .train(
                |p: &Params| {
                    calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tiny::train_input(p)
                },
                None,
                Some(max),
            )
            .unwrap();
        assert_eq!(r.global_step, 10);
        assert_eq!(r.final_loss, None);
        assert_eq!(
            r.log,
            vec!["Skipping training since max_steps has already saved.".to_string()]
        );
    }
    // No work: the input_fn was not called and nothing in the model_dir changed.
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    let after: Vec<(String, std::time::SystemTime)> = files(&dir)
        .into_iter()
        .map(|f| {
            let m = std::fs::metadata(dir.join(&f)).unwrap().modified().unwrap();
            (f, m)
        })
        .collect();
    assert_eq!(before, after);
}

#[test]
fn restoring_without_a_variable_the_model_needs_names_it() {
    let dir = temp_dir("ckpt_missing_slot");
    estimator(
        config(&dir, 5, 1000),
        Params::new().with("optimizer", "sgd"),
    )
    .train(tiny::train_input, None, Some(5))
    .unwrap();
    // Adam needs variables the SGD checkpoint does not have (TF's `beta1_power` first).
    let e = estimator(config(&dir, 5, 1000), Params::new())
        .train(tiny::train_input, None, Some(10))
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("model.ckpt-5.safetensors")
            && text.contains("it has no variable `beta1_power`")
            && text.contains("was the model changed since the checkpoint?"),
        "{text}"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 5]);
}
