//! A layer's saved options, read one by one so that none is silently ignored: every key a
//! layer builder does not take must be metadata or at Keras's neutral value (`null`,
//! `false`), or building fails naming the layer, its class and the option.

use super::error::KerasError;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::BTreeSet;

/// Keys that describe the layer rather than its computation (an input shape on a layer that
/// is not first only repeats what its input tensor has).
const METADATA: &[&str] = &[
    "name",
    "trainable",
    "dtype",
    "build_config",
    "registered_name",
    "batch_input_shape",
    "batch_shape",
];

/// One layer's `config` object, with the keys read so far.
pub(crate) struct Options<'a> {
    pub(crate) layer: &'a str,
    pub(crate) class: &'a str,
    config: &'a serde_json::Map<String, Value>,
    read: RefCell<BTreeSet<&'a str>>,
}

impl<'a> Options<'a> {
    pub(crate) fn new(
        layer: &'a str,
        class: &'a str,
        config: &'a serde_json::Map<String, Value>,
    ) -> Options<'a> {
        Options {
            layer,
            class,
            config,
            read: RefCell::new(BTreeSet::new()),
        }
    }

    fn mark(&self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.config.get_key_value(key)?;
        self.read.borrow_mut().insert(k.as_str());
        Some(v)
    }

    /// The raw value of `key`, marked as read.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.mark(key).filter(|v| !v.is_null())
    }

    pub(crate) fn unsupported(&self, option: &str, value: &Value, why: &str) -> KerasError {
        KerasError::UnsupportedOption {
            layer: self.layer.to_string(),
            class: self.class.to_string(),
            option: option.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        }
    }

    fn malformed(&self, key: &str, want: &str) -> KerasError {
        KerasError::Config(format!(
            "layer `{}` ({}): option `{key}` should be {want}, got {}",
            self.layer,
            self.class,
            self.config.get(key).unwrap_or(&Value::Null)
        ))
    }

    pub(crate) fn f64_or(&self, key: &str, default: f64) -> Result<f64, KerasError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_f64().ok_or_else(|| self.malformed(key, "a number")),
        }
    }

    pub(crate) fn i64_req(&self, key: &str) -> Result<i64, KerasError> {
        self.get(key)
            .and_then(Value::as_i64)
            .ok_or_else(|| self.malformed(key, "an integer"))
    }

    pub(crate) fn bool_or(&self, key: &str, default: bool) -> Result<bool, KerasError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.malformed(key, "true or false")),
        }
    }

    pub(crate) fn str_or(&self, key: &str, default: &'a str) -> Result<&'a str, KerasError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_str().ok_or_else(|| self.malformed(key, "a string")),
        }
    }

    /// An integer or a list of `n` integers (Keras's `kernel_size=3` or `(3, 3)`).
    pub(crate) fn ints(
        &self,
        key: &str,
        n: usize,
        default: Option<i64>,
    ) -> Result<Vec<i64>, KerasError> {
        match self.get(key) {
            None => default
                .map(|d| vec![d; n])
                .ok_or_else(|| self.malformed(key, "an integer or a list of integers")),
            Some(Value::Number(x)) => x
                .as_i64()
                .map(|d| vec![d; n])
                .ok_or_else(|| self.malformed(key, "an integer")),
            Some(Value::Array(items)) if items.len() == n => items
                .iter()
                .map(|i| i.as_i64().ok_or_else(|| self.malformed(key, "integers")))
                .collect(),
            Some(_) => Err(self.malformed(key, &format!("an integer or {n} integers"))),
        }
    }

    /// Fails unless `key` is absent or equal to one of `allowed` (Keras's defaults).
    pub(crate) fn only(&self, key: &str, allowed: &[Value], why: &str) -> Result<(), KerasError> {
        match self.mark(key) {
            Some(v) if !v.is_null() && !allowed.contains(v) => Err(self.unsupported(key, v, why)),
            _ => Ok(()),
        }
    }

    /// `data_format` must be channels_last (what tessel's layouts are).
    pub(crate) fn channels_last(&self) -> Result<(), KerasError> {
        self.only(
            "data_format",
            &[Value::from("channels_last")],
            "only channels_last is supported",
        )
    }

    /// A constraint of any kind is refused: tessel does not project weights after updates.
    pub(crate) fn no_constraints(&self, keys: &[&str]) -> Result<(), KerasError> {
        for key in keys {
            self.only(key, &[], "weight constraints are not applied by tessel")?;
        }
        Ok(())
    }

    /// Initializers only matter for a model that has no saved weights; they are read (the
    /// saved weights are the values) and so accepted.
    pub(crate) fn initializers(&self, keys: &[&str]) {
        for key in keys {
            self.mark(key);
        }
    }

    /// Every key not read: metadata and neutral values pass, anything else is an error.
    pub(crate) fn finish(&self) -> Result<(), KerasError> {
        let read = self.read.borrow();
        for (key, value) in self.config {
            if read.contains(key.as_str()) || METADATA.contains(&key.as_str()) {
                continue;
            }
            let neutral = matches!(value, Value::Null | Value::Bool(false))
                || value.as_array().is_some_and(|a| a.is_empty())
                || value.as_object().is_some_and(|o| o.is_empty());
            if !neutral {
                return Err(self.unsupported(key, value, "tessel does not know this option"));
            }
        }
        if let Some(dtype) = self.config.get("dtype") {
            let name = dtype_name(dtype);
            if name.as_deref().is_some_and(|n| n != "float32") {
                return Err(self.unsupported(
                    "dtype",
                    dtype,
                    "layers compute in float32 only (mixed precision is not supported)",
                ));
            }
        }
        Ok(())
    }
}

/// A dtype as Keras saves it: `"float32"` or a `DTypePolicy` object.
pub(crate) fn dtype_name(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o
            .get("config")
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    }
}
