//! Faults inside a training loop, each injected: an input_fn failing at a batch mid-loop, a
//! corrupt TFRecord file, a model whose variables turn NaN, a huge learning rate, and the
//! stop flag raised from the input pipeline's thread. Each stops training within the running
//! loop, returns the error, leaves the model_dir holding complete checkpoints only (the last
//! good one latest), and the next `train` resumes from that checkpoint to the same bytes an
//! uninterrupted run writes.

use super::{assert_clean, serial};
use crate::support::tiny::{self, checkpoint_steps, ckpt_bytes, config, estimator, temp_dir};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessel_estimator::input::{DatasetError, Element, ElementSpec};
use tessel_estimator::{EstimatorError, Input, Params};

fn latest(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("checkpoint"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string()
}

/// The unshuffled repeated input that never fails (the failing input's order).
fn plain_input() -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    tiny::failing_input(u64::MAX)
}

#[test]
fn input_fn_failing_mid_loop() {
    let _s = serial();
    let dir = temp_dir("fault_input");
    // Batch 8: element 200 is in batch 25, i.e. step 26, inside the loop of steps 21..=30.
    let e = estimator(config(&dir, 10, 20), Params::new())
        .train(tiny::failing_input(200), None, Some(50))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the input_fn failed: map failed on element 200: injected failure (at step 26; the model_dir keeps the checkpoint for step 20, which the next train() resumes from)"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 20]);
    assert_eq!(latest(&dir), "model_checkpoint_path: \"model.ckpt-20\"");
    assert_clean(&dir);

    // The next train resumes at 20 (input position 20 batches) and writes what an
    // uninterrupted run writes.
    let r = estimator(config(&dir, 10, 20), Params::new())
        .train(plain_input(), None, Some(50))
        .unwrap();
    assert!(
        r.log
            .iter()
            .any(|l| l.ends_with("model.ckpt-20.safetensors")),
        "{:?}",
        r.log
    );
    let reference = temp_dir("fault_input_ref");
    estimator(config(&reference, 10, 20), Params::new())
        .train(plain_input(), None, Some(50))
        .unwrap();
    assert!(ckpt_bytes(&dir, 50) == ckpt_bytes(&reference, 50));
}

#[test]
fn corrupt_tfrecord_file() {
    let _s = serial();
    let dir = temp_dir("fault_record");
    let data = temp_dir("fault_record_data");
    let file = data.join("train.tfrecord");
    tiny::write_records(&file);
    // Damage record 50's payload (records are 16 + 36 bytes): its data CRC no longer holds.
    // Batch 8: record 50 is in batch 6, step 7, inside the loop of steps 6..=10.
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[50 * 52 + 12 + 5] ^= 0xFF;
    std::fs::write(&file, &bytes).unwrap();

    let e = estimator(config(&dir, 5, 5), Params::new())
        .train(tiny::record_input(file.clone()), None, Some(20))
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, EstimatorError::Input(_)), "{text}");
    assert!(
        text.contains("train.tfrecord: record 50 at byte 2600: corrupt data")
            && text.contains("CRC")
            && text.contains("(at step 7; the model_dir keeps the checkpoint for step 5,"),
        "{text}"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 5]);
    assert_clean(&dir);

    // Repaired, training resumes from step 5 and matches a run that never saw the damage.
    tiny::write_records(&file);
    estimator(config(&dir, 5, 5), Params::new())
        .train(tiny::record_input(file.clone()), None, Some(20))
        .unwrap();
    let reference = temp_dir("fault_record_ref");
    estimator(config(&reference, 5, 5), Params::new())
        .train(tiny::record_input(file), None, Some(20))
        .unwrap();
    assert!(ckpt_bytes(&dir, 20) == ckpt_bytes(&reference, 20));
}

#[test]
fn nan_check_names_the_variable_and_the_steps() {
    let _s = serial();
    let dir = temp_dir("fault_nan");
    let poisoned = Params::new().with("poison_step", 12);
    // Global step 12 is step 13, in the loop of steps 11..=15.
    let e = estimator(config(&dir, 5, 5), poisoned)
        .train(tiny::train_input, None, Some(30))
        .unwrap_err();
    match &e {
        EstimatorError::Diverged {
            variable,
            what,
            first_step,
            last_step,
        } => {
            assert_eq!((*first_step, *last_step), (11, 15));
            assert_eq!(*what, "NaN");
            assert_eq!(variable, "dense/kernel");
        }
        other => panic!("expected Diverged, got {other}"),
    }
    assert_eq!(
        e.to_string(),
        "the model diverged: variable `dense/kernel` holds NaN after steps 11..=15 (the last checkpoint, from before these steps, is intact)"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 5, 10]);
    assert_eq!(latest(&dir), "model_checkpoint_path: \"model.ckpt-10\"");
    let ten = tessel_estimator::checkpoint::read_checkpoint(&dir.join("model.ckpt-10.safetensors"))
        .unwrap();
    for (name, a) in &ten.variables {
        assert!(
            (0..a.len()).all(|i| a.data.get_f64(i).is_finite()),
            "{name} is not finite in the last good checkpoint"
        );
    }
    assert_clean(&dir);
}

#[test]
fn huge_learning_rate_diverges_with_a_clear_error() {
    let _s = serial();
    let dir = temp_dir("fault_lr");
    let p = Params::new()
        .with("optimizer", "sgd")
        .with("learning_rate", 1e38);
    let e = estimator(config(&dir, 4, 4), p)
        .train(tiny::train_input, None, Some(40))
        .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(
            e,
            EstimatorError::Diverged { .. } | EstimatorError::LossDiverged { .. }
        ),
        "{text}"
    );
    assert!(text.contains("the last checkpoint"), "{text}");
    // The checkpoints left are complete, and the latest is finite.
    let last = *checkpoint_steps(&dir).last().unwrap();
    let c = tessel_estimator::checkpoint::read_checkpoint(
        &dir.join(format!("model.ckpt-{last}.safetensors")),
    )
    .unwrap();
    assert!(c
        .variables
        .iter()
        .all(|(_, a)| (0..a.len()).all(|i| a.data.get_f64(i).is_finite())));
    assert_clean(&dir);
}

/// The repeated unshuffled input that runs `hook` on element `at`.
fn input_with_hook(
    at: u64,
    hook: Arc<dyn Fn() + Send + Sync>,
) -> impl Fn(&Params) -> Result<Input, EstimatorError> {
    move |params: &Params| {
        let seen = Arc::new(AtomicU64::new(0));
        let hook = Arc::clone(&hook);
        let ds = tiny::examples()
            .repeat(None)
            .map(
                |s: &ElementSpec| Ok(s.clone()),
                0,
                move |e: Element| -> Result<Element, DatasetError> {
                    if seen.fetch_add(1, Ordering::SeqCst) == at {
                        hook();
                    }
                    Ok(e)
                },
            )?
            .batch(params.batch_size() as u64, true)?;
        Ok(Input::new(ds, "y"))
    }
}

fn check_stopped_then_resumed(
    name: &str,
    hook: impl Fn(&tessel_estimator::TpuEstimator) -> Arc<dyn Fn() + Send + Sync>,
) {
    let dir = temp_dir(name);
    let est = estimator(config(&dir, 10, 1000), Params::new());
    // Element 184 is in batch 23, step 24, inside the loop of steps 21..=30.
    let e = est
        .train(input_with_hook(184, hook(&est)), None, Some(100))
        .unwrap_err();
    assert!(matches!(e, EstimatorError::Interrupted { step: 30 }), "{e}");
    assert_eq!(
        e.to_string(),
        "interrupted at step 30; the checkpoint for step 30 is saved and the next train() resumes from it"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 30]);
    assert_clean(&dir);
    // The flag is cleared: the same estimator trains on, resuming at 30.
    let r = est.train(plain_input(), None, Some(100)).unwrap();
    assert_eq!(r.global_step, 100);
    let reference = temp_dir(&format!("{name}_ref"));
    estimator(config(&reference, 10, 1000), Params::new())
        .train(plain_input(), None, Some(100))
        .unwrap();
    assert!(ckpt_bytes(&dir, 100) == ckpt_bytes(&reference, 100));
}

#[test]
fn stop_flag_from_another_thread_stops_within_the_loop() {
    let _s = serial();
    check_stopped_then_resumed("fault_stop_flag", |est| {
        let flag = est.stop_flag();
        Arc::new(move || flag.store(true, Ordering::SeqCst))
    });
}

/// The library installs no signal handler: after `train` (which the stop flag ended),
/// SIGINT and SIGTERM keep their default action, so a program's Ctrl-C works as before.
#[test]
fn train_installs_no_signal_handler() {
    let _s = serial();
    let dir = temp_dir("fault_no_handler");
    let est = estimator(config(&dir, 10, 1000), Params::new());
    let flag = est.stop_flag();
    est.train(
        input_with_hook(20, Arc::new(move || flag.store(true, Ordering::SeqCst))),
        None,
        Some(100),
    )
    .unwrap_err();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a query (a null new action) of the current disposition into a zeroed struct.
        let handler = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(signal, std::ptr::null(), &mut old), 0);
            old.sa_sigaction
        };
        assert_eq!(handler, libc::SIG_DFL, "signal {signal} has a handler");
    }
}

/// Regression: a stop requested during the last loop used to stay set (training had reached
/// its target, so it returned Ok without clearing it), and the next train() then stopped
/// after its first loop with `Interrupted`.
#[test]
fn a_stop_during_the_last_loop_does_not_leak_into_the_next_train() {
    let _s = serial();
    let dir = temp_dir("fault_stop_last_loop");
    let est = estimator(config(&dir, 10, 1000), Params::new());
    let flag = est.stop_flag();
    // Element 56 is in batch 7, step 8: the last loop of a train to 10.
    let r = est
        .train(
            input_with_hook(56, Arc::new(move || flag.store(true, Ordering::SeqCst))),
            None,
            Some(10),
        )
        .unwrap();
    assert_eq!(r.global_step, 10);
    let r = est.train(plain_input(), None, Some(40)).unwrap();
    assert_eq!(r.global_step, 40);
}

#[test]
fn a_nan_loss_with_finite_variables_is_reported_at_its_step() {
    let _s = serial();
    let dir = temp_dir("fault_nan_loss");
    let e = estimator(
        config(&dir, 5, 5),
        Params::new().with("poison_loss_step", 12),
    )
    .train(tiny::train_input, None, Some(30))
    .unwrap_err();
    assert!(
        matches!(e, EstimatorError::LossDiverged { step: 13, .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "the loss is NaN at step 13 (the last checkpoint, from before this loop, is intact)"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 5, 10]);
    assert_clean(&dir);
}

/// save_checkpoints_secs: a checkpoint at the end of the first loop that ends after the
/// interval passed (the input sleeps 1.2 s in the loop of steps 11..=15), not before.
#[test]
fn save_checkpoints_secs_cadence() {
    let _s = serial();
    let dir = temp_dir("fault_secs");
    let mut c = config(&dir, 5, 1);
    c.save_checkpoints_steps = None;
    c.save_checkpoints_secs = Some(1);
    // Element 96 is in batch 12, step 13.
    let sleep: Arc<dyn Fn() + Send + Sync> =
        Arc::new(|| std::thread::sleep(std::time::Duration::from_millis(1200)));
    let r = estimator(c, Params::new())
        .train(input_with_hook(96, sleep), None, Some(25))
        .unwrap();
    let saved: Vec<&String> = r
        .log
        .iter()
        .filter(|l| l.starts_with("Saving checkpoints for "))
        .collect();
    assert_eq!(saved.len(), 3, "{saved:?}");
    assert!(saved[0].starts_with("Saving checkpoints for 0 "));
    assert!(saved[1].starts_with("Saving checkpoints for 15 "));
    assert!(saved[2].starts_with("Saving checkpoints for 25 "));
}

#[test]
fn an_input_that_ends_says_to_repeat() {
    let _s = serial();
    let dir = temp_dir("fault_input_end");
    // 96 examples make 12 batches of 8: step 13 has none.
    let e = estimator(config(&dir, 5, 5), Params::new())
        .train(tiny::eval_input, None, Some(20))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the input_fn failed: the input_fn's dataset ended after 12 batches (use repeat() to train for more steps than one pass gives) (at step 13; the model_dir keeps the checkpoint for step 10, which the next train() resumes from)"
    );
    assert_eq!(checkpoint_steps(&dir), vec![0, 5, 10]);
    assert_clean(&dir);
}
