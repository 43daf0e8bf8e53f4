//! The merge layers: Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate.

use super::Ctx;
use super::Layer;
use crate::keras::error::KerasError;
use crate::keras::options::Options;
use tessel_compiler::trace::Tensor;

pub(super) struct Merge {
    class: String,
}

impl Merge {
    pub(super) fn new(_o: &Options, class: &str) -> Result<Merge, KerasError> {
        Ok(Merge {
            class: class.to_string(),
        })
    }
}

impl Layer for Merge {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let (first, rest) = inputs.split_first().ok_or("takes at least one input")?;
        if self.class == "Subtract" && inputs.len() != 2 {
            return Err(format!("Subtract takes two inputs, got {}", inputs.len()));
        }
        let mut acc = first.clone();
        for x in rest {
            acc = match self.class.as_str() {
                "Add" | "Average" => acc + x,
                "Subtract" => acc - x,
                "Multiply" => acc * x,
                "Maximum" => acc.maximum(x),
                _ => acc.minimum(x),
            };
        }
        if self.class == "Average" {
            acc = acc * (1.0 / inputs.len() as f32);
        }
        Ok(acc)
    }
}

pub(super) struct Concatenate {
    axis: i64,
}

impl Concatenate {
    pub(super) fn new(o: &Options) -> Result<Concatenate, KerasError> {
        Ok(Concatenate {
            axis: o.f64_or("axis", -1.0)? as i64,
        })
    }
}

impl Layer for Concatenate {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let (first, rest) = inputs.split_first().ok_or("takes at least one input")?;
        let axis = if self.axis < 0 {
            self.axis + first.rank() as i64
        } else {
            self.axis
        };
        let others: Vec<&Tensor> = rest.iter().collect();
        Ok(first.concat(&others, axis))
    }
}
