//! The machine's memory, as the session sees it before it compiles or runs a program, and the
//! replica ceiling that goes with it.
//!
//! - [`available_bytes`]: `TESSEL_MEMORY_BYTES` if set (a positive integer; for containers
//!   whose `/proc/meminfo` shows the host's memory, and for tests), else `MemAvailable` from
//!   `/proc/meminfo`, else unknown (no check is made).
//! - [`largest_value`]: the instruction of a module whose value needs the most bytes. A
//!   program with one value larger than the memory available can never run here, so the
//!   session rejects it before compiling ([`check_module`]) instead of letting an allocation
//!   abort the process.
//! - [`check_run`]: before a run, the bytes every replica needs (the JIT's arena, or the
//!   interpreter's largest value) times the replicas, against the memory available then.
//! - [`MAX_REPLICAS`]: every replica is a thread with its own stack and arena; more than this
//!   many is refused whatever the memory.

use std::fmt;
use tessel_compiler::ir::{Module, Shape};

/// The most replicas a program may run on (one thread each).
pub(crate) const MAX_REPLICAS: usize = 1024;

/// The environment variable that overrides the memory available, in bytes.
pub const MEMORY_VARIABLE: &str = "TESSEL_MEMORY_BYTES";

/// Bytes of memory the process may still use: `TESSEL_MEMORY_BYTES`, else `MemAvailable`,
/// else `None` (unknown). A malformed variable is an error, not silently ignored.
pub(crate) fn available_bytes() -> Result<Option<u64>, String> {
    if let Ok(v) = std::env::var(MEMORY_VARIABLE) {
        return match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!(
                "{MEMORY_VARIABLE} must be a positive number of bytes, got \"{v}\""
            )),
        };
    }
    Ok(std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_available(&text)))
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line["MemAvailable:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// The value of a module that needs the most memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LargestValue {
    /// `name in computation`.
    pub instruction: String,
    /// Its shape as text, without layout.
    pub shape: String,
    pub bytes: u64,
}

/// The instruction, in any computation, whose value (all leaves of a tuple) is largest.
pub(crate) fn largest_value(module: &Module) -> Option<LargestValue> {
    let mut best: Option<LargestValue> = None;
    for cid in module.computation_ids() {
        let c = module.computation(cid);
        for (_, instr) in c.instructions() {
            let bytes = shape_bytes(&instr.shape);
            if best.as_ref().is_none_or(|b| bytes > b.bytes) {
                best = Some(LargestValue {
                    instruction: format!("{} in {}", instr.name, c.name),
                    shape: instr.shape.to_text(false),
                    bytes,
                });
            }
        }
    }
    best
}

/// Bytes of every array leaf of `shape`, saturating (the verifier rejects overflowing shapes).
pub(crate) fn shape_bytes(shape: &Shape) -> u64 {
    shape
        .leaves()
        .iter()
        .map(|a| a.checked_byte_size().map_or(u64::MAX, |b| b.max(0) as u64))
        .fold(0u64, u64::saturating_add)
}

/// Not enough memory for a program, or too many replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryError {
    /// One value is larger than all the memory available.
    Value { value: LargestValue, available: u64 },
    /// A run's buffers on all its replicas.
    Run {
        /// What every replica needs.
        per_replica: u64,
        replicas: usize,
        /// What needs it: "its buffer arena" or the largest value.
        what: String,
        available: u64,
    },
    /// More replicas than [`MAX_REPLICAS`].
    TooManyReplicas { replicas: usize },
    /// `TESSEL_MEMORY_BYTES` is malformed.
    Variable(String),
    /// The allocator refused a program's buffer arena of `bytes`.
    Arena { bytes: u64 },
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryError::Value { value, available } => write!(
                f,
                "{} needs {} for its value {}, but only {} of memory are available",
                value.instruction,
                bytes_text(value.bytes),
                value.shape,
                bytes_text(*available)
            ),
            MemoryError::Run {
                per_replica,
                replicas,
                what,
                available,
            } => {
                if *replicas == 1 {
                    write!(f, "the program needs {} ({what})", bytes_text(*per_replica))?;
                } else {
                    write!(
                        f,
                        "{replicas} replicas need {} ({} each for {what})",
                        bytes_text(per_replica.saturating_mul(*replicas as u64)),
                        bytes_text(*per_replica)
                    )?;
                }
                write!(
                    f,
                    ", but only {} of memory are available",
                    bytes_text(*available)
                )
            }
            MemoryError::TooManyReplicas { replicas } => write!(
                f,
                "{replicas} replicas is more than the {MAX_REPLICAS} a run may have (one thread each)"
            ),
            MemoryError::Variable(m) => f.write_str(m),
            MemoryError::Arena { bytes } => {
                write!(f, "cannot allocate the {} buffer arena", bytes_text(*bytes))
            }
        }
    }
}

impl std::error::Error for MemoryError {}

/// Bytes as `N bytes (X.Y GiB)` (the exact count first, for scripts and tests).
pub(crate) fn bytes_text(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut x = n as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!("{n} bytes ({x:.1} {})", UNITS[unit])
}

/// Rejects a module with a value larger than the memory available (before compiling it).
pub(crate) fn check_module(module: &Module) -> Result<(), MemoryError> {
    let Some(available) = available_bytes().map_err(MemoryError::Variable)? else {
        return Ok(());
    };
    check_module_against(module, available)
}

fn check_module_against(module: &Module, available: u64) -> Result<(), MemoryError> {
    match largest_value(module) {
        Some(value) if value.bytes > available => Err(MemoryError::Value { value, available }),
        _ => Ok(()),
    }
}

/// Rejects a replica count above [`MAX_REPLICAS`].
pub(crate) fn check_replicas(replicas: usize) -> Result<(), MemoryError> {
    if replicas > MAX_REPLICAS {
        return Err(MemoryError::TooManyReplicas { replicas });
    }
    Ok(())
}

/// Rejects a run whose `replicas` replicas need more than `per_replica` bytes each than the
/// memory available now.
pub(crate) fn check_run(per_replica: u64, replicas: usize, what: &str) -> Result<(), MemoryError> {
    // Nothing left to allocate (a JIT program's arenas are pooled after its first run): no
    // need to read the memory available on every step.
    if per_replica == 0 || replicas == 0 {
        return Ok(());
    }
    let Some(available) = available_bytes().map_err(MemoryError::Variable)? else {
        return Ok(());
    };
    check_run_against(per_replica, replicas, what, available)
}

fn check_run_against(
    per_replica: u64,
    replicas: usize,
    what: &str,
    available: u64,
) -> Result<(), MemoryError> {
    if per_replica.saturating_mul(replicas as u64) > available {
        return Err(MemoryError::Run {
            per_replica,
            replicas,
            what: what.to_string(),
            available,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::hlo_text::parse_module;

    #[test]
    fn meminfo_is_read_in_bytes() {
        let text = "MemTotal:       16314860 kB\nMemFree:  100 kB\nMemAvailable:   8000 kB\n";
        assert_eq!(mem_available(text), Some(8000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: x kB\n"), None);
    }

    #[test]
    fn the_largest_value_is_named_and_checked() {
        let m = parse_module(
            "HloModule m\n\nENTRY e {\n  x = f32[] parameter(0)\n  \
             ROOT b = f32[1000000,1000000] broadcast(x), dimensions={}\n}\n",
            None,
        )
        .unwrap();
        let v = largest_value(&m).unwrap();
        assert_eq!(v.bytes, 4_000_000_000_000);
        assert_eq!(v.instruction, "b in e");
        let e = check_module_against(&m, 1 << 30).unwrap_err().to_string();
        assert!(
            e.contains("b in e needs 4000000000000 bytes (3.6 TiB)"),
            "{e}"
        );
        assert!(e.contains("f32[1000000,1000000]"), "{e}");
        assert!(e.contains("1073741824 bytes (1.0 GiB) of memory"), "{e}");
        assert!(check_module_against(&m, 1 << 50).is_ok());
    }

    #[test]
    fn runs_and_replicas_are_bounded() {
        assert!(check_run_against(100, 10, "its buffer arena", 1000).is_ok());
        let e = check_run_against(100, 11, "its buffer arena", 1000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("11 replicas need 1100 bytes"), "{e}");
        assert!(check_replicas(MAX_REPLICAS).is_ok());
        assert!(check_replicas(40000)
            .unwrap_err()
            .to_string()
            .contains("40000 replicas is more than the 1024"));
    }
}
