//! Writes one conv2d, dense, pooling (SAME, with border windows) and batch normalization
//! forward pass (inputs, weights, outputs, moving statistics after a training step) to a
//! safetensors file, for `tests/tf/check_layers.py` to compare with TensorFlow. Ignored: the
//! lead runs it by hand with the TF environment (`python tests/tf/check_layers.py` runs it).
//! The directory is `TESSEL_LAYERS_DUMP` (default: the system's temporary directory).

use crate::support::{random_array, run, scalar_step};
use tessel_compiler::ir::{Array, ElementType::F32};
use tessel_compiler::trace::Tensor;
use tessel_estimator::model::layers::{
    average_pooling2d, batch_normalization, conv2d, dense, max_pooling2d, Activation, BatchNorm,
    Conv2d, Dense, Padding,
};
use tessel_estimator::model::{Graph, Mode};
use tessel_runtime::host_io::write_safetensors;
use tessel_runtime::session::Device;

#[test]
#[ignore = "writes a file for tests/tf/check_layers.py (needs TensorFlow to be useful)"]
fn dump_layers_for_tensorflow() {
    let x4 = random_array(&[2, 7, 6, 3], F32, 21);
    let x2 = random_array(&[5, 7], F32, 22);
    let mut g = Graph::new("tf_check", Mode::Train, Some(99));
    let p4 = g.tracer.parameter("x4", &[2, 7, 6, 3], F32);
    let p2 = g.tracer.parameter("x2", &[5, 7], F32);
    let same = Conv2d {
        padding: Padding::Same,
        activation: Activation::Relu,
        ..Conv2d::default()
    };
    let mut outs: Vec<(&str, Tensor)> = vec![
        ("conv_same", conv2d(&mut g, &p4, 4, [3, 3], same).unwrap()),
        (
            "conv_valid_s2",
            conv2d(
                &mut g,
                &p4,
                2,
                [2, 3],
                Conv2d {
                    strides: [2, 2],
                    ..Conv2d::default()
                },
            )
            .unwrap(),
        ),
        ("dense", dense(&mut g, &p2, 3, Dense::default()).unwrap()),
        (
            "avg_same",
            average_pooling2d(&mut g, &p4, [3, 3], [2, 2], Padding::Same).unwrap(),
        ),
        (
            "max_same",
            max_pooling2d(&mut g, &p4, [3, 3], [2, 2], Padding::Same).unwrap(),
        ),
        (
            "bn4_train",
            batch_normalization(&mut g, &p4, BatchNorm::default(), true).unwrap(),
        ),
        (
            "bn2_train",
            batch_normalization(&mut g, &p2, BatchNorm::default(), true).unwrap(),
        ),
    ];
    for layer in ["batch_normalization", "batch_normalization_1"] {
        for stat in ["moving_mean", "moving_variance"] {
            let id = g.variables.find(&format!("{layer}/{stat}")).unwrap();
            let name: &'static str = Box::leak(format!("{layer}/{stat}/after").into_boxed_str());
            outs.push((name, g.value_after_step(id)));
        }
    }
    let names: Vec<String> = g.variables.all().map(|(_, v)| v.name.clone()).collect();
    // Biases, gamma and beta get random values so that they are checked too.
    let init: Vec<Array> = g
        .variables
        .initial_values()
        .unwrap()
        .into_iter()
        .zip(&names)
        .enumerate()
        .map(|(i, (a, n))| {
            match n.ends_with("bias") || n.ends_with("gamma") || n.ends_with("beta") {
                true => random_array(a.shape.dims.as_slice(), F32, 100 + i as u32),
                false => a,
            }
        })
        .collect();
    let refs: Vec<&Tensor> = outs.iter().map(|(_, t)| t).collect();
    let module = g.tracer.finish(&refs).unwrap();
    let mut args = vec![scalar_step(0), x4.clone(), x2.clone()];
    args.extend(init.iter().cloned());
    let results = run(&module, &Device::interpreter(), args);
    let mut tensors = vec![("x4".to_string(), x4), ("x2".to_string(), x2)];
    tensors.extend(names.into_iter().zip(init));
    tensors.extend(outs.iter().map(|(n, _)| format!("out/{n}")).zip(results));
    let dir = std::env::var("TESSEL_LAYERS_DUMP")
        .unwrap_or_else(|_| std::env::temp_dir().display().to_string());
    let path = std::path::Path::new(&dir).join("tessel_layers.safetensors");
    write_safetensors(&path, &tensors).unwrap();
    println!("wrote {}", path.display());
}
