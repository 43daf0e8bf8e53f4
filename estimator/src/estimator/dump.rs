//! Dumping the traced step programs, as a TF user expects from `XLA_FLAGS=--xla_dump_to=DIR`.
//!
//! With `XLA_FLAGS` holding `--xla_dump_to=DIR` (or `TESSEL_DUMP_TO=DIR`), every mode's traced
//! step is written to `DIR/<module name>.step.hlo` as HLO text before it is compiled, so
//! `tessel run DIR/tpu_estimator_train.step.hlo --loop K --infeed 1,2 --profile ...` replays
//! the program the estimator runs. The device also dumps its passes and CLIF under `DIR`.

use std::path::PathBuf;
use tessel_compiler::hlo_text::{print_module, PrintOptions};
use tessel_compiler::ir::Module;

/// The dump directory from `TESSEL_DUMP_TO`, else from `XLA_FLAGS`' `--xla_dump_to`.
pub(crate) fn dump_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TESSEL_DUMP_TO").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    xla_dump_to(&std::env::var("XLA_FLAGS").ok()?)
}

/// `--xla_dump_to=DIR` (or `--xla_dump_to DIR`) in an `XLA_FLAGS` value.
fn xla_dump_to(flags: &str) -> Option<PathBuf> {
    let mut words = flags.split_whitespace();
    while let Some(w) = words.next() {
        if let Some(dir) = w.strip_prefix("--xla_dump_to=") {
            return Some(PathBuf::from(dir));
        }
        if w == "--xla_dump_to" {
            return words.next().map(PathBuf::from);
        }
    }
    None
}

/// Writes `step` into the dump directory when one is set. A dump that cannot be written is
/// logged as a warning and does not stop training.
pub(crate) fn dump_step(step: &Module) {
    let Some(dir) = dump_dir() else { return };
    let path = dir.join(format!("{}.step.hlo", step.name));
    let text = print_module(step, &PrintOptions::default());
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, text)) {
        log::warn!(target: "tessel", "cannot dump the step to {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::xla_dump_to;
    use std::path::PathBuf;

    #[test]
    fn reads_xla_dump_to_in_both_spellings() {
        assert_eq!(
            xla_dump_to("--xla_cpu_fast_math --xla_dump_to=/tmp/d"),
            Some(PathBuf::from("/tmp/d"))
        );
        assert_eq!(xla_dump_to("--xla_dump_to /x"), Some(PathBuf::from("/x")));
        assert_eq!(xla_dump_to("--xla_dump_hlo_as_text"), None);
        assert_eq!(xla_dump_to(""), None);
    }
}
