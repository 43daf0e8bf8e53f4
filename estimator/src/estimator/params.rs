//! `params`: the dict TPUEstimator hands to model_fn and input_fn.
//!
//! The user's entries, plus `batch_size` (the per-shard batch of the current mode), which
//! TPUEstimator sets itself; `batch_size` and `context` are reserved, and a user entry under
//! either is TF's error.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Index;
use std::panic::Location;
use std::sync::Mutex;

/// One value of `params`.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl Param {
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Param::Int(v) => Some(*v),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Param::Float(v) => Some(*v),
            Param::Int(v) => Some(*v as f64),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Param::Str(v) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Param::Int(v) => write!(f, "{v}"),
            // Python's repr: a whole float keeps its `.0`.
            Param::Float(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e16 => {
                write!(f, "{v:.1}")
            }
            Param::Float(v) => write!(f, "{v}"),
            Param::Bool(v) => write!(f, "{}", if *v { "True" } else { "False" }),
            Param::Str(v) => write!(f, "'{v}'"),
        }
    }
}

impl From<i64> for Param {
    fn from(v: i64) -> Self {
        Param::Int(v)
    }
}
impl From<f64> for Param {
    fn from(v: f64) -> Self {
        Param::Float(v)
    }
}
impl From<bool> for Param {
    fn from(v: bool) -> Self {
        Param::Bool(v)
    }
}
impl From<&str> for Param {
    fn from(v: &str) -> Self {
        Param::Str(v.to_string())
    }
}

/// TPUEstimator's reserved keys.
pub(crate) const RESERVED_KEYS: [&str; 2] = ["batch_size", "context"];

/// The params dict.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params {
    values: BTreeMap<String, Param>,
    /// Keys `params["x"]` asked for that are absent, with the line that asked.
    missing: MissingKeys,
    /// For a host's input_fn in an MPI job of several hosts: (this host, hosts).
    input_host: Option<(usize, usize)>,
}

/// What `params["absent"]` returns: no number, no string (`as_f64` and the others are `None`).
static ABSENT: Param = Param::Bool(false);

/// Absent keys asked for, reported after the model_fn returns (each `Params` value has its
/// own list: a clone starts empty, and lists never make two `Params` differ).
#[derive(Debug, Default)]
struct MissingKeys(Mutex<Vec<(String, &'static Location<'static>)>>);

impl Clone for MissingKeys {
    fn clone(&self) -> MissingKeys {
        MissingKeys::default()
    }
}

impl PartialEq for MissingKeys {
    fn eq(&self, _: &MissingKeys) -> bool {
        true
    }
}

impl Params {
    pub fn new() -> Params {
        Params::default()
    }

    /// Adds an entry (builder style).
    pub fn with(mut self, key: &str, value: impl Into<Param>) -> Params {
        self.values.insert(key.to_string(), value.into());
        self
    }

    pub fn get(&self, key: &str) -> Option<&Param> {
        self.values.get(key)
    }

    /// `params["batch_size"]`: the per-shard batch size of the current mode.
    pub fn batch_size(&self) -> usize {
        self.get("batch_size").and_then(Param::as_i64).unwrap_or(0) as usize
    }

    /// The user's keys that TPUEstimator reserves, if any (TF's error lists them).
    pub(crate) fn reserved_keys_used(&self) -> Vec<String> {
        RESERVED_KEYS
            .iter()
            .filter(|k| self.values.contains_key(**k))
            .map(|k| k.to_string())
            .collect()
    }

    /// The hosts whose input_fns feed training (TF's `params["context"].num_hosts`): more
    /// than 1 in an MPI job of several hosts, where each host's input_fn gets its index in
    /// `params["context"]` and the per-host batch in `params["batch_size"]`, and reads its
    /// part of each global batch: `dataset.batch(batch_size).shard(num_hosts, context)`.
    pub fn num_hosts(&self) -> usize {
        self.input_host.map_or(1, |(_, hosts)| hosts)
    }

    /// The host this input_fn feeds (TF's `context.current_input_fn_deployment()`'s index
    /// under PER_HOST_V1): 0 unless [`Params::num_hosts`] is more than 1.
    pub fn host_index(&self) -> usize {
        self.input_host.map_or(0, |(host, _)| host)
    }

    /// These params for host `host` of `hosts`' input_fn: the host in `context` too.
    pub(crate) fn for_input_host(&self, host: usize, hosts: usize) -> Params {
        let mut p = self.clone().with("context", host as i64);
        p.input_host = Some((host, hosts));
        p
    }

    pub(crate) fn with_batch_size(&self, batch_size: usize) -> Params {
        self.clone().with("batch_size", batch_size as i64)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Param)> {
        self.values.iter()
    }

    /// The keys `params["x"]` asked for that are absent, with where, and the keys there are.
    pub(crate) fn missing_error(&self) -> Option<String> {
        let missing = self.missing.0.lock().unwrap_or_else(|e| e.into_inner());
        if missing.is_empty() {
            return None;
        }
        let asked: Vec<String> = missing
            .iter()
            .map(|(key, at)| format!("`{key}` (at {at})"))
            .collect();
        let keys: Vec<String> = self.values.keys().map(|k| format!("`{k}`")).collect();
        Some(format!(
            "params has no key {}; its keys are {} (TF's KeyError)",
            asked.join(", "),
            keys.join(", ")
        ))
    }
}

impl Index<&str> for Params {
    type Output = Param;
    /// An absent key (Python's `KeyError`) is recorded with this line and reported when the
    /// model_fn returns, before anything is compiled; meanwhile it reads as a value that is no
    /// number and no string.
    #[track_caller]
    fn index(&self, key: &str) -> &Param {
        match self.values.get(key) {
            Some(v) => v,
            None => {
                self.missing
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((key.to_string(), Location::caller()));
                &ABSENT
            }
        }
    }
}
