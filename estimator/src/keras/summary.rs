//! `model.summary()`: per layer its name, class, output shape and parameter count, the
//! totals, and — for a model tessel cannot build — which layers or options it refuses, why.

use super::architecture;
use super::error::KerasError;
use super::estimator::{placeholder_inputs, KerasParts};
use super::layers;
use super::model::KerasModel;
use crate::model::{Graph, Mode};
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    pub name: String,
    pub class: String,
    /// Output shape with the batch as `None`; `None` when tessel could not build the layer.
    pub output_shape: Option<Vec<Option<i64>>>,
    pub params: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub model_name: String,
    pub rows: Vec<SummaryRow>,
    pub trainable: u64,
    pub non_trainable: u64,
    /// Why tessel cannot run the model: one line per refused layer or option.
    pub problems: Vec<String>,
}

impl Summary {
    pub fn total(&self) -> u64 {
        self.trainable + self.non_trainable
    }
}

/// The summary of a model: its layers built and traced on a batch of one when tessel can;
/// otherwise each layer's class with the reason it is refused.
pub fn summary(parts: &KerasParts) -> Result<Summary, KerasError> {
    let arch = architecture::parse(&parts.model_config)?;
    let mut problems = Vec::new();
    for l in &arch.layers {
        if l.class != "InputLayer" {
            if let Err(e) = layers::from_config(l) {
                problems.push(e.to_string());
            }
        }
    }
    let mut rows: Vec<SummaryRow> = arch
        .layers
        .iter()
        .map(|l| SummaryRow {
            name: l.name.clone(),
            class: l.class.clone(),
            output_shape: None,
            params: 0,
        })
        .collect();
    // Parameter counts from the saved weights (what Keras counts), shapes from a trace.
    let (mut trainable, mut non_trainable) = (0u64, 0u64);
    for (row, l) in rows.iter_mut().zip(&arch.layers) {
        let count: u64 = parts
            .weights
            .get(&l.name)
            .map(|ws| {
                ws.iter()
                    .map(|w| w.shape.iter().product::<usize>() as u64)
                    .sum()
            })
            .unwrap_or(0);
        row.params = count;
    }
    if problems.is_empty() {
        let model = KerasModel::new(
            &parts.model_config,
            parts.weights.clone(),
            parts.keras_version.as_deref(),
        )?;
        let mut g = Graph::new("keras_summary", Mode::Predict, None);
        let inputs = placeholder_inputs(&mut g, &model, 1)?;
        match model.trace(&mut g, &inputs, false) {
            Ok(traced) => {
                for (i, spec) in model.arch.inputs.iter().enumerate() {
                    if let Some(row) = rows.iter_mut().find(|r| r.name == spec.name) {
                        let mut s = vec![None];
                        s.extend(spec.shape.iter().copied());
                        row.output_shape = Some(s);
                        let _ = i;
                    }
                }
                for (layer, dims) in &traced.shapes {
                    let mut s = vec![None];
                    s.extend(dims.iter().skip(1).map(|&d| Some(d)));
                    rows[*layer].output_shape = Some(s);
                }
                for (row, specs) in rows.iter_mut().zip(&traced.specs) {
                    for w in specs {
                        let n = w.dims.iter().product::<i64>() as u64;
                        if w.trainable && !frozen(parts, &row.name) {
                            trainable += n;
                        } else {
                            non_trainable += n;
                        }
                    }
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        trainable = rows.iter().map(|r| r.params).sum();
    }
    Ok(Summary {
        model_name: arch.name,
        rows,
        trainable,
        non_trainable,
        problems,
    })
}

fn frozen(parts: &KerasParts, layer: &str) -> bool {
    let Ok(arch) = architecture::parse(&parts.model_config) else {
        return false;
    };
    arch.layers
        .iter()
        .find(|l| l.name == layer)
        .and_then(|l| l.config.get("trainable"))
        .and_then(serde_json::Value::as_bool)
        == Some(false)
}

fn shape_text(s: &Option<Vec<Option<i64>>>) -> String {
    match s {
        None => "?".into(),
        Some(dims) => {
            let parts: Vec<String> = dims
                .iter()
                .map(|d| d.map_or("None".to_string(), |n| n.to_string()))
                .collect();
            if parts.len() == 1 {
                format!("({},)", parts[0])
            } else {
                format!("({})", parts.join(", "))
            }
        }
    }
}

/// `1,234`.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Summary {
    /// The table `model.summary()` prints (Keras 3's columns).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Model: \"{}\"", self.model_name)?;
        let line = "─".repeat(78);
        writeln!(f, "{line}")?;
        writeln!(
            f,
            "{:<34}{:<28}{:>16}",
            "Layer (type)", "Output Shape", "Param #"
        )?;
        writeln!(f, "{line}")?;
        for r in &self.rows {
            let first = format!("{} ({})", r.name, r.class);
            writeln!(
                f,
                "{:<34}{:<28}{:>16}",
                first,
                shape_text(&r.output_shape),
                grouped(r.params)
            )?;
        }
        writeln!(f, "{line}")?;
        writeln!(f, " Total params: {}", grouped(self.total()))?;
        writeln!(f, " Trainable params: {}", grouped(self.trainable))?;
        writeln!(f, " Non-trainable params: {}", grouped(self.non_trainable))?;
        if self.problems.is_empty() {
            writeln!(f, "tessel can run every layer of this model.")?;
        } else {
            writeln!(f, "tessel cannot run this model:")?;
            for p in &self.problems {
                writeln!(f, "  - {p}")?;
            }
        }
        Ok(())
    }
}
