//! Modules as XLA itself prints them (`tests/corpus/xla_printed/`, see its README): `%`
//! names, computation signatures, layouts, renumbered debug tables. Each parses to the same
//! module as the JAX text it was printed from (`module_difference`, with every instruction's
//! stack frame compared as the source line it resolves to, since XLA renumbers the tables),
//! so what tessel compiles does not depend on which of the two a user hands it. `names_reused` is a
//! hand-written module that reuses instruction names across computations: XLA renamed them,
//! and parsing the source renames them the same way.

use std::path::{Path, PathBuf};
use tessel_compiler::hlo_text::{module_difference, parse_module_file};
use tessel_compiler::ir::Module;

fn corpus(dir: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(dir)
}

/// The text XLA printed `printed` from: a `.source.hlo` beside it, else the corpus file of
/// the same name.
fn source_of(printed: &Path) -> PathBuf {
    let name = printed.file_name().unwrap().to_str().unwrap();
    let stem = name.trim_end_matches(".hlo");
    let beside = printed.with_file_name(format!("{stem}.source.hlo"));
    if beside.exists() {
        return beside;
    }
    for dir in ["jax_user_programs", "conformance"] {
        let p = corpus(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name}: no source module");
}

#[test]
fn modules_printed_by_xla_parse_to_their_sources() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus("xla_printed"))
        .expect("the fixtures")
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.to_str().unwrap();
            n.ends_with(".hlo") && !n.ends_with(".source.hlo")
        })
        .collect();
    files.sort();
    assert!(files.len() >= 50, "{} fixtures", files.len());
    let mut failures = Vec::new();
    for printed in &files {
        let parse = |p: &Path| parse_module_file(p).unwrap_or_else(|e| panic!("{e}"));
        let (mut a, mut b) = (parse(printed), parse(&source_of(printed)));
        let (la, lb) = (source_lines(&a), source_lines(&b));
        if la != lb {
            failures.push(format!("{}: source lines differ", printed.display()));
        }
        for m in [&mut a, &mut b] {
            forget_stack_frames(m);
        }
        if let Some(d) = module_difference(&a, &b) {
            failures.push(format!("{}: {d}", printed.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every instruction's name and the source location its metadata resolves to.
fn source_lines(m: &Module) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = m
        .computation_ids()
        .flat_map(|c| {
            m.computation(c)
                .instructions()
                .map(|(_, i)| (i.name.clone(), format!("{:?}", m.source_location(i))))
                .collect::<Vec<_>>()
        })
        .collect();
    v.sort();
    v
}

/// The debug tables and the stack frame ids into them, which XLA renumbers when it prints.
fn forget_stack_frames(m: &mut Module) {
    m.debug_info = Default::default();
    for c in m.computation_ids().collect::<Vec<_>>() {
        let comp = m.computation_mut(c);
        let ids: Vec<_> = comp.instructions().map(|(id, _)| id).collect();
        for id in ids {
            comp.get_mut(id).metadata.stack_frame_id = None;
        }
    }
}
