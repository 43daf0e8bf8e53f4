//! The names of a layer's weights in Keras's order (`layer.weights`), for the formats that
//! store them by position only (`.keras`'s `vars/0`, `vars/1`, ...).

use serde_json::Value;

/// The weight names of a layer of `class` with `config`, as Keras creates them; `None` for a
/// class whose weights this table does not know.
pub(crate) fn weight_names(class: &str, config: &Value) -> Option<Vec<&'static str>> {
    let flag = |key: &str| config.get(key).and_then(Value::as_bool).unwrap_or(true);
    let with_bias = |mut names: Vec<&'static str>| {
        if flag("use_bias") {
            names.push("bias");
        }
        names
    };
    Some(match class {
        "Dense" | "Conv1D" | "Conv2D" | "Conv3D" | "Conv1DTranspose" | "Conv2DTranspose"
        | "Conv3DTranspose" => with_bias(vec!["kernel"]),
        "DepthwiseConv1D" | "DepthwiseConv2D" => with_bias(vec!["depthwise_kernel"]),
        "SeparableConv1D" | "SeparableConv2D" => {
            with_bias(vec!["depthwise_kernel", "pointwise_kernel"])
        }
        "BatchNormalization" | "LayerNormalization" => {
            let mut names = Vec::new();
            if flag("scale") {
                names.push("gamma");
            }
            if flag("center") {
                names.push("beta");
            }
            if class == "BatchNormalization" {
                names.extend(["moving_mean", "moving_variance"]);
            }
            names
        }
        "Embedding" => vec!["embeddings"],
        "PReLU" => vec!["alpha"],
        _ => return None,
    })
}
