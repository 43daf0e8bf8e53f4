//! The Fashion-MNIST example on the slice kept in the repository: a few training steps, the
//! whole test slice evaluated (300 images, the last batch padded), predicted and exported.

#[path = "../../examples/fashion_mnist.rs"]
mod fashion_mnist;

use crate::support::tiny::temp_dir;
use clap::Parser;
use tessel_estimator::estimator::ExportedModel;

#[test]
fn trains_evaluates_the_whole_slice_predicts_and_exports() {
    let dir = temp_dir("fashion_mnist_example");
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/data/fashion_mnist_slice");
    let model_dir = dir.join("model");
    // The slice's recipe: 60 steps at batch 32, seeded, in `mode`, with `extra` flags.
    let flags = |mode: &str, model_dir: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "fashion_mnist",
            "--data-dir",
            data,
            "--model-dir",
            model_dir.to_str().unwrap(),
            "--batch-size",
            "32",
            "--train-steps",
            "60",
            "--iterations",
            "20",
            "--learning-rate",
            "0.003",
            "--random-seed",
            "7",
            "--mode",
            mode,
        ];
        args.extend_from_slice(extra);
        fashion_mnist::Flags::parse_from(args)
    };
    let s = fashion_mnist::run(&flags("all", &model_dir, &[])).unwrap();
    assert_eq!(s.global_step, 60);
    let eval = s.eval.expect("evaluated");
    // 300 = 9 batches of 32 and one of 12: every image once.
    assert_eq!(eval.examples, 300);
    let accuracy = eval.metric("accuracy").unwrap();
    let top3 = eval.metric("top_3").unwrap();
    assert!(
        accuracy > 0.4,
        "accuracy {accuracy} after 60 steps (chance is 0.1)"
    );
    assert!(top3 >= accuracy, "top_3 {top3} < accuracy {accuracy}");
    // The mean of the per-example losses over the real images is the evaluation's loss.
    let mean_loss = eval.metric("mean_loss").unwrap();
    assert!(
        (mean_loss - eval.loss).abs() < 1e-5,
        "{mean_loss} vs {}",
        eval.loss
    );
    // Predict: every image, in order, with the evaluation's accuracy.
    assert_eq!(s.predicted.len(), 300);
    let predicted = s.predict_accuracy.unwrap();
    assert!(
        (predicted - accuracy).abs() < 1e-9,
        "{predicted} vs {accuracy}"
    );
    // The export loads and takes the serving input.
    let export = s.export.expect("exported");
    ExportedModel::load(&export).expect("the export loads");
    assert!(export.join("model.hlo").is_file());

    // A round trip through TF's checkpoint format: the same run writing only TF's tensor
    // bundles evaluates and predicts as the safetensors run did; an empty model_dir restores
    // its checkpoint (a TF checkpoint path) to the same figures.
    let tf_dir = dir.join("tf_format");
    let tf = fashion_mnist::run(&flags("all", &tf_dir, &["--checkpoint-format", "tf"])).unwrap();
    assert!(tf_dir.join("model.ckpt-60.index").is_file());
    assert!(!tf_dir.join("model.ckpt-60.safetensors").exists());
    let tf_eval = tf.eval.expect("evaluated");
    assert_eq!(tf_eval.metric("accuracy"), Some(accuracy));
    assert_eq!(tf_eval.loss, eval.loss);
    assert_eq!(tf.predicted, s.predicted);
    let restored_dir = dir.join("restored");
    let ckpt = tf_dir.join("model.ckpt-60");
    let restored = fashion_mnist::run(&flags(
        "evaluate",
        &restored_dir,
        &["--warm-start-from", ckpt.to_str().unwrap()],
    ))
    .unwrap();
    let restored = restored.eval.expect("evaluated");
    assert_eq!(restored.global_step, 60);
    assert_eq!(restored.metric("accuracy"), Some(accuracy));
}
