//! Dropout and SpatialDropout1D/2D: in training, inverted dropout with tessel's device
//! randomness (whole channels for the spatial forms); the identity in inference. The masks
//! are not Keras's: its random stream is not reproduced.

use super::{dims_of, single, Ctx, Layer};
use crate::keras::error::KerasError;
use crate::keras::options::Options;
use crate::model::random::random_uniform;
use tessel_compiler::ir::ElementType;
use tessel_compiler::trace::Tensor;

pub(super) struct Dropout {
    rate: f64,
    /// 0: every element; 1 and 2: whole channels of a 1-D or 2-D feature map.
    spatial: usize,
}

impl Dropout {
    pub(super) fn new(o: &Options, spatial: usize) -> Result<Dropout, KerasError> {
        o.only("noise_shape", &[], "noise_shape is not supported")?;
        if spatial > 0 {
            o.channels_last()?;
        }
        // The seed picks Keras's random stream, which tessel does not reproduce.
        o.get("seed");
        let rate = o.f64_or("rate", 0.5)?;
        if !(0.0..1.0).contains(&rate) {
            return Err(o.unsupported("rate", &rate.into(), "the rate must be in [0, 1)"));
        }
        Ok(Dropout { rate, spatial })
    }
}

impl Layer for Dropout {
    fn call(&self, cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        if !cx.training || self.rate == 0.0 {
            return Ok(x.clone());
        }
        let d = dims_of(x)?;
        let noise_dims: Vec<i64> = match self.spatial {
            0 => d.clone(),
            n if d.len() == n + 2 => (0..d.len())
                .map(|i| if i == 0 || i == d.len() - 1 { d[i] } else { 1 })
                .collect(),
            n => {
                return Err(format!(
                    "needs an input of rank {} (batch first), got shape {d:?}",
                    n + 2
                ))
            }
        };
        let noise = random_uniform(cx.g, &noise_dims);
        let keep = noise
            .greater_equal(&noise.scalar_like(self.rate))
            .cast(ElementType::F32);
        let keep = if noise_dims == d {
            keep
        } else {
            keep.broadcast_to(d.as_slice())
        };
        Ok(x * (1.0 / (1.0 - self.rate)) as f32 * keep)
    }
}
