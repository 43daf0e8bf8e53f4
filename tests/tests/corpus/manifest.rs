//! The corpus manifest (`manifest.tsv`), its safetensors files, and the comparison against
//! JAX's numbers.

use std::path::PathBuf;
use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::{Array, Module};
use tessel_runtime::host_io::read_safetensors;

/// `tests/corpus/jax_user_programs/`, committed in the repository with JAX's outputs.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/jax_user_programs")
}

/// One row of `manifest.tsv`.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub replicas: usize,
    pub rtol: f64,
    /// Parameters `tessel grad --wrt` differentiates with respect to (empty: none).
    pub grad_wrt: Vec<u32>,
}

/// Every row of the manifest, in its order. Panics on a malformed row, so a broken manifest
/// cannot make the tests pass vacuously.
pub fn entries() -> Vec<Entry> {
    let path = dir().join("manifest.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("name\treplicas\trtol\tgrad_wrt\twhat"),
        "manifest header"
    );
    let entries: Vec<Entry> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 5, "manifest row {line:?}");
            Entry {
                name: f[0].to_string(),
                replicas: f[1].parse().expect("replicas"),
                rtol: f[2].parse().expect("rtol"),
                grad_wrt: f[3]
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().expect("grad_wrt"))
                    .collect(),
            }
        })
        .collect();
    assert!(
        entries.len() >= 37,
        "the manifest lists {} modules",
        entries.len()
    );
    entries
}

impl Entry {
    pub fn module(&self) -> Result<Module, String> {
        parse_module_file(&dir().join(format!("{}.hlo", self.name))).map_err(|e| e.to_string())
    }

    pub fn inputs(&self) -> Vec<Array> {
        numbered(&format!("{}.inputs.safetensors", self.name))
    }

    pub fn outputs(&self) -> Vec<Array> {
        numbered(&format!("{}.outputs.safetensors", self.name))
    }

    /// The value and then the gradients, as `tessel grad` orders them.
    pub fn grad_outputs(&self) -> Vec<Array> {
        numbered(&format!("{}.grad_outputs.safetensors", self.name))
    }
}

/// The arrays of a corpus safetensors file, keyed "0", "1", ... in that order.
fn numbered(file: &str) -> Vec<Array> {
    let path = dir().join(file);
    let mut v = read_safetensors(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    v.sort_by_key(|(k, _)| k.parse::<usize>().expect("numeric keys"));
    for (i, (k, _)) in v.iter().enumerate() {
        assert_eq!(k, &i.to_string(), "{file}: keys are 0..n");
    }
    v.into_iter().map(|(_, a)| a).collect()
}

/// `Err` names the first output element that differs from JAX's by more than
/// `1e-5 + rtol |JAX|` (integers: exactly), or a count, shape or type mismatch.
pub fn compare(got: &[Array], want: &[Array], rtol: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, JAX gives {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.shape != w.shape {
            return Err(format!("output {i} is {}, JAX gives {}", g.shape, w.shape));
        }
        for j in 0..w.len() {
            if w.element_type().is_float() {
                let (a, b) = (g.data.get_f64(j), w.data.get_f64(j));
                let ok = (a - b).abs() <= 1e-5 + rtol * b.abs() || (a.is_nan() && b.is_nan());
                if !ok {
                    return Err(format!("output {i}[{j}] = {a}, JAX {b}"));
                }
            } else if g.data.get_i64(j) != w.data.get_i64(j) {
                return Err(format!(
                    "output {i}[{j}] = {}, JAX {}",
                    g.data.get_i64(j),
                    w.data.get_i64(j)
                ));
            }
        }
    }
    Ok(())
}
