//! The variables of a layer with a kernel and an optional bias (dense, conv1d, conv2d).

use super::LayerError;
use crate::model::get_variable::{get_variable, variable_scope, Reuse};
use crate::model::graph::Graph;
use crate::model::variables::Initializer;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;

/// `NAME/kernel` of `kernel_dims` and, with `use_bias`, `NAME/bias` of the kernel's last
/// dimension, created (or reused) in the layer's variable scope as `tf.layers` creates them.
pub(super) fn kernel_and_bias(
    g: &mut Graph,
    name: &str,
    kernel_dims: &[i64],
    ty: ElementType,
    (kernel_initializer, bias_initializer): (Initializer, Initializer),
    use_bias: bool,
) -> Result<(Tensor, Option<Tensor>), LayerError> {
    let units = kernel_dims.last().copied().unwrap_or(1);
    variable_scope(g, name, Reuse::Inherit, |g| {
        let kernel = get_variable(g, "kernel", kernel_dims, ty, kernel_initializer, true)?;
        let bias = match use_bias {
            true => Some(get_variable(
                g,
                "bias",
                &[units],
                ty,
                bias_initializer,
                true,
            )?),
            false => None,
        };
        Ok::<_, LayerError>((kernel, bias))
    })
}
