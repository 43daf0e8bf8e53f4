//! `kernel_regularizer` / `bias_regularizer` / `embeddings_regularizer`: Keras's L1, L2 and
//! L1L2 penalties, added to the loss as `model.losses` are.

use serde_json::Value;
use tessel_compiler::trace::Tensor;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Regularizer {
    pub(crate) l1: f64,
    pub(crate) l2: f64,
}

impl Regularizer {
    /// A saved regularizer: `{"class_name": "L1" | "L2" | "L1L2", "config": {...}}`, or `None`.
    pub(crate) fn parse(v: Option<&Value>) -> Result<Option<Regularizer>, String> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let class = v.get("class_name").and_then(Value::as_str).unwrap_or("");
        let config = v.get("config");
        let num = |k: &str| config.and_then(|c| c.get(k)).and_then(Value::as_f64);
        match class {
            "L1" => Ok(Some(Regularizer {
                l1: num("l1").unwrap_or(0.01),
                l2: 0.0,
            })),
            "L2" => Ok(Some(Regularizer {
                l1: 0.0,
                l2: num("l2").unwrap_or(0.01),
            })),
            "L1L2" => Ok(Some(Regularizer {
                l1: num("l1").unwrap_or(0.0),
                l2: num("l2").unwrap_or(0.0),
            })),
            _ => Err(format!(
                "regularizer {v} is not supported (supported: L1, L2, L1L2)"
            )),
        }
    }

    /// `l1 * sum(|w|) + l2 * sum(w^2)`.
    #[track_caller]
    pub(crate) fn penalty(&self, w: &Tensor) -> Tensor {
        let all: Vec<i64> = (0..w.rank() as i64).collect();
        let mut total = w.scalar_like(0.0).reshape(&[]);
        if self.l1 != 0.0 {
            total = total + w.abs().reduce_sum(&all, false) * self.l1 as f32;
        }
        if self.l2 != 0.0 {
            total = total + (w * w).reduce_sum(&all, false) * self.l2 as f32;
        }
        total
    }
}
