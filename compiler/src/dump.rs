//! The dump directory: the module before, after every pass that changed it, and after the
//! pipeline, as HLO text; the buffer assignment; a Graphviz drawing with fusions as clusters.
//!
//! Files are `module_NNNN.NAME.before_optimizations.hlo`,
//! `module_NNNN.NAME.SSSS.after_PASS.hlo` (`SSSS` counts every pass run, so `ls` lists them
//! in pipeline order), `module_NNNN.NAME.after_optimizations.hlo`,
//! `module_NNNN.NAME.buffer-assignment.txt` and `module_NNNN.NAME.after_optimizations.dot`.
//! `NNNN` is the first number not yet used in the directory, so several compiles can share it.

use crate::hlo_text::{print_module, PrintOptions};
use crate::ir::{ComputationId, InstrId, Module, Op};
use crate::passes::buffer_assignment::BufferAssignment;
use crate::passes::pipeline::PassRecord;
use crate::passes::util::code_computations;
use regex::Regex;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why the dump directory could not be written.
#[derive(Debug, Error)]
pub enum DumpError {
    #[error("the dump's pass filter {pattern:?} is not a regular expression: {source}")]
    BadPassFilter {
        pattern: String,
        source: regex::Error,
    },
    #[error("cannot create dump directory {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes the dump files of one compile (see the module documentation).
pub(crate) struct Dumper {
    dir: PathBuf,
    /// `module_NNNN.NAME`
    prefix: String,
    filter: Option<Regex>,
    step: usize,
}

/// Keeps file names portable: letters, digits, `_`, `-` and `.`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The first module number not used by a `module_NNNN.` file in `dir`.
fn next_module_number(dir: &Path) -> usize {
    let mut next = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(rest) = name.strip_prefix("module_") {
                if let Some(n) = rest.split('.').next().and_then(|n| n.parse::<usize>().ok()) {
                    next = next.max(n + 1);
                }
            }
        }
    }
    next
}

impl Dumper {
    /// Creates `dir` if needed and writes the module before optimization.
    pub(crate) fn new(dir: &Path, m: &Module, pass_re: Option<&str>) -> Result<Dumper, DumpError> {
        let filter = pass_re
            .map(|re| {
                Regex::new(re).map_err(|source| DumpError::BadPassFilter {
                    pattern: re.to_string(),
                    source,
                })
            })
            .transpose()?;
        std::fs::create_dir_all(dir).map_err(|source| DumpError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let prefix = format!(
            "module_{:04}.{}",
            next_module_number(dir),
            sanitize(&m.name)
        );
        let d = Dumper {
            dir: dir.to_path_buf(),
            prefix,
            filter,
            step: 0,
        };
        d.write("before_optimizations.hlo", &print(m))?;
        Ok(d)
    }

    fn write(&self, suffix: &str, text: &str) -> Result<(), DumpError> {
        let path = self.dir.join(format!("{}.{suffix}", self.prefix));
        std::fs::write(&path, text).map_err(|source| DumpError::Write { path, source })
    }

    /// Called after every pass run: writes the module if the pass changed it and its name
    /// matches the filter.
    pub(crate) fn after_pass(&mut self, record: &PassRecord, m: &Module) -> Result<(), DumpError> {
        self.step += 1;
        let wanted = self
            .filter
            .as_ref()
            .is_none_or(|re| re.is_match(&record.pass));
        if record.changed && wanted {
            let suffix = format!("{:04}.after_{}.hlo", self.step, sanitize(&record.pass));
            self.write(&suffix, &print(m))?;
        }
        Ok(())
    }

    /// Writes the optimized module, its buffer assignment and its drawing.
    pub(crate) fn finish(
        &mut self,
        m: &Module,
        buffers: &BufferAssignment,
    ) -> Result<(), DumpError> {
        self.write("after_optimizations.hlo", &print(m))?;
        self.write("buffer-assignment.txt", &buffers.to_text())?;
        self.write("after_optimizations.dot", &to_dot(m))
    }
}

fn print(m: &Module) -> String {
    print_module(m, &PrintOptions::default())
}

fn node(c: ComputationId, id: InstrId) -> String {
    format!("n{}_{}", c.0, id.index())
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A Graphviz drawing of the computations that run as code; each fusion is a cluster holding
/// its fused instructions.
pub(crate) fn to_dot(m: &Module) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", escape(&m.name));
    let _ = writeln!(out, "  compound=true; rankdir=TB; node [fontsize=10];");
    let mut edges: Vec<(String, String)> = Vec::new();
    for cid in code_computations(m) {
        let c = m.computation(cid);
        let _ = writeln!(out, "  subgraph cluster_c{} {{", cid.0);
        let _ = writeln!(out, "    label=\"{}\";", escape(&c.name));
        for id in c.post_order() {
            let instr = c.get(id);
            if let Op::Fusion { kind, calls } = &instr.op {
                let f = m.computation(*calls);
                let _ = writeln!(out, "    subgraph cluster_{} {{", node(cid, id));
                let _ = writeln!(
                    out,
                    "      label=\"{} ({kind})\"; style=filled; fillcolor=\"#e8f0ff\";",
                    escape(&instr.name)
                );
                for fid in f.post_order() {
                    let fi = f.get(fid);
                    if matches!(fi.op, Op::Parameter(_)) {
                        continue;
                    }
                    let _ = writeln!(
                        out,
                        "      {} [shape=box, label=\"{}\\n{}\"];",
                        node(*calls, fid),
                        escape(&fi.name),
                        escape(&fi.shape.to_text(false))
                    );
                    for &o in fi.operands() {
                        if !matches!(f.get(o).op, Op::Parameter(_)) {
                            edges.push((node(*calls, o), node(*calls, fid)));
                        }
                    }
                }
                let _ = writeln!(out, "    }}");
            } else {
                let shape = if matches!(instr.op, Op::Parameter(_) | Op::Constant(_)) {
                    "ellipse"
                } else {
                    "box"
                };
                let _ = writeln!(
                    out,
                    "    {} [shape={shape}, label=\"{}\\n{}\"];",
                    node(cid, id),
                    escape(&instr.name),
                    escape(&instr.shape.to_text(false))
                );
            }
        }
        let _ = writeln!(out, "  }}");
        // Edges between instructions; a fusion is entered at the fused instructions that
        // read each parameter and left from its root.
        for id in c.post_order() {
            let instr = c.get(id);
            let source = |o: InstrId| match c.get(o).op {
                Op::Fusion { calls, .. } => node(calls, m.computation(calls).root()),
                _ => node(cid, o),
            };
            match instr.op {
                Op::Fusion { calls, .. } => {
                    let f = m.computation(calls);
                    for (k, &o) in instr.operands().iter().enumerate() {
                        if let Some(p) = f.parameter(k as u32) {
                            for u in f.users(p) {
                                edges.push((source(o), node(calls, u)));
                            }
                        }
                    }
                }
                _ => {
                    for &o in instr.operands() {
                        edges.push((source(o), node(cid, id)));
                    }
                }
            }
        }
    }
    for (a, b) in edges {
        let _ = writeln!(out, "  {a} -> {b};");
    }
    let _ = writeln!(out, "}}");
    out
}
