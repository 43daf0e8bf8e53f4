//! Every corpus module parses, prints, and round-trips through text (full and canonical),
//! and no truncation or mutation of a corpus file makes the parser panic.

use tessel_compiler::hlo_text::{
    module_difference, parse_module, parse_module_file, print_module, PrintOptions,
};
use tessel_compiler::ir::Module;
use tessel_compiler::verifier::verify;

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

/// Modules read back from printed text pass the verifier (names unique in the module,
/// shapes consistent), in full and canonical form.
#[test]
fn printed_text_verifies() {
    for (name, _, m) in load_corpus() {
        if let Err(errors) = verify(&m) {
            panic!("{name} as JAX wrote it does not verify: {}", errors[0]);
        }
        for opts in [full(), canonical()] {
            let again = parse_module(&print_module(&m, &opts), Some(&name)).unwrap();
            if let Err(errors) = verify(&again) {
                panic!("{name} printed with {opts:?}: {}", errors[0]);
            }
        }
    }
}

/// Drops the layouts after array shapes (`f32[2,3]{1,0}` -> `f32[2,3]`).
fn without_layouts(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == ']' && chars.peek() == Some(&'{') {
            for d in chars.by_ref() {
                if d == '}' {
                    break;
                }
            }
        }
    }
    out
}

/// Every corpus file printed in full has exactly JAX's lines, apart from layouts (tessel
/// prints the default one) and the order of computations.
#[test]
fn full_text_keeps_what_jax_wrote() {
    for (name, original, m) in load_corpus() {
        let printed = print_module(&m, &full());
        let lines = |text: &str| {
            let mut v: Vec<String> = text
                .lines()
                .filter(|l| !l.is_empty())
                .map(without_layouts)
                .collect();
            v.sort();
            v
        };
        let (a, b) = (lines(&original), lines(&printed));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y, "{name}");
        }
        assert_eq!(a.len(), b.len(), "{name}");
    }
}

/// Parses `text` (a damaged corpus file); the parser may refuse it but must not panic, and a
/// module it accepts must print to text that parses again, in full and canonical form.
fn check_damaged(text: &str, what: &str) {
    let outcome = std::panic::catch_unwind(|| {
        if let Ok(m) = parse_module(text, Some("damaged.hlo")) {
            for opts in [full(), canonical()] {
                let printed = print_module(&m, &opts);
                if let Err(e) = parse_module(&printed, None) {
                    panic!("printed text does not parse: {e}\n{printed}");
                }
            }
        } else if let Err(e) = parse_module(text, Some("damaged.hlo")) {
            // Errors render with a position inside the text.
            assert!(e.line >= 1 && e.column >= 1, "{e}");
            let _ = e.to_string();
        }
    });
    if outcome.is_err() {
        panic!("parser panicked on {what}");
    }
}

/// Small corpus files, so that the exhaustive loops stay fast.
fn small_corpus() -> &'static [(String, String)] {
    static SMALL: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    SMALL.get_or_init(|| {
        load_corpus()
            .into_iter()
            .filter(|(_, text, _)| text.len() < 20_000)
            .map(|(name, text, _)| (name, text))
            .collect()
    })
}

#[test]
fn truncated_text_never_panics() {
    for (name, text) in small_corpus() {
        let step = (text.len() / 400).max(1);
        for cut in (0..text.len()).step_by(step) {
            if text.is_char_boundary(cut) {
                check_damaged(&text[..cut], &format!("{name} cut at {cut}"));
            }
        }
    }
}

#[test]
fn mutated_text_never_panics() {
    const REPLACEMENTS: &[&str] = &[
        "",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        ",",
        "=",
        "\"",
        "-",
        "9",
        "0",
        " ",
        "\n",
        "%",
        "x",
        "/*",
        "*/",
        "<=",
        "?",
        "->",
        "_",
        ":",
        "ROOT ",
        "e+",
        "nan",
        "-1",
        "99999999999999999999",
    ];
    for (name, text) in small_corpus() {
        let step = (text.len() / 150).max(1);
        for (k, at) in (0..text.len()).step_by(step).enumerate() {
            if !text.is_char_boundary(at) || !text.is_char_boundary(at + 1) {
                continue;
            }
            let with = REPLACEMENTS[k % REPLACEMENTS.len()];
            let mutated = format!("{}{}{}", &text[..at], with, &text[at + 1..]);
            check_damaged(
                &mutated,
                &format!("{name} with byte {at} replaced by {with:?}"),
            );
        }
    }
}

mod random_damage {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// Random splices of corpus text: deletions, insertions of arbitrary characters.
        #[test]
        fn random_edits_never_panic(
            file in 0usize..64,
            at in 0.0f64..1.0,
            len in 0usize..12,
            insert in "[ -~\n]{0,8}",
        ) {
            let corpus = super::small_corpus();
            let (name, text) = &corpus[file % corpus.len()];
            let mut start = ((text.len() as f64) * at) as usize;
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let mutated = format!("{}{}{}", &text[..start], insert, &text[end..]);
            super::check_damaged(&mutated, &format!("{name}: {start}..{end} -> {insert:?}"));
        }
    }
}
