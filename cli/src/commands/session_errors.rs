//! How the CLI reports a [`SessionError`]: the library's message, with the file and the flags
//! a command-line user typed (`--replicas`, `--infeed`, `--backend`, `--dump-pass-re`) added.

use std::path::Path;
use tessel_runtime::session::{
    CompileError, DumpError, LoopError, MemoryError, ReplicaCountError, SessionError,
};

/// Which verb reports: `tessel compile` and `tessel run` word the device's refusal apart.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Compile,
    Run,
}

/// The message to print for `e`; diagnostics and verifier errors go to stderr first.
pub fn describe(e: SessionError, file: &Path, verb: Verb) -> String {
    let file = file.display();
    match e {
        SessionError::Invalid(errors) if verb == Verb::Compile => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            format!("{file} is not a valid module ({} errors)", errors.len())
        }
        SessionError::Invalid(errors) => {
            let list: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
            format!("{file} is not a legal module:\n{}", list.join("\n"))
        }
        SessionError::NotLegal {
            diagnostics,
            rendered,
        } => {
            eprint!("{rendered}");
            let n = diagnostics.len();
            let s = if n == 1 { "" } else { "s" };
            match verb {
                Verb::Compile => {
                    format!("{file} cannot be compiled for the device ({n} diagnostic{s})")
                }
                Verb::Run => format!(
                    "{file} cannot run on the device ({n} diagnostic{s}); the reference \
                     interpreter (--backend interp) runs it"
                ),
            }
        }
        SessionError::ReplicaCount(ReplicaCountError::Mesh { expected, mesh, .. }) => format!(
            "this shard_map module runs on {expected} replicas (its mesh {mesh}); pass --replicas {expected}"
        ),
        SessionError::Memory(e @ MemoryError::TooManyReplicas { .. }) => format!("--replicas: {e}"),
        SessionError::Memory(e @ MemoryError::Run { replicas, .. }) if replicas > 1 => {
            format!("--replicas {replicas}: {e}")
        }
        SessionError::Loop(
            e @ (LoopError::NoSuchParameter { .. } | LoopError::Repeated { .. }),
        ) => format!("--infeed: {e}"),
        SessionError::Loop(e) => format!("--loop: {e}"),
        // The library names the pass filter; the user typed it as a flag.
        SessionError::Optimize(CompileError::Dump(DumpError::BadPassFilter { pattern, source })) => {
            format!("--dump-pass-re {pattern:?}: {source}")
        }
        SessionError::Compile(e) if verb == Verb::Compile => {
            format!("the JIT could not compile the optimized module: {e}")
        }
        other => other.to_string(),
    }
}
