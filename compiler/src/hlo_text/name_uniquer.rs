//! Instruction names unique in the module, made the way XLA's parser makes them.
//!
//! HLO text may reuse an instruction name in another computation (hand-written modules and
//! XLA's own tests do: every reducer has its `a` and `b`); within one computation a name is
//! defined once. XLA accepts such a module and renames, computation by computation in text
//! order and instruction by instruction, through its `NameUniquer`: a name `base.N` (N a
//! number) or `base` (N = 0) keeps N if no earlier name took that number for `base`, else
//! takes the first free number at or after a counter kept per `base` (every number below
//! the counter is taken, so that is the lowest free one). So `a` in three computations
//! becomes `a`, `a.1`, `a.2`, and every name printed matches what XLA prints for the module.
//! The IR needs the names unique (the verifier checks it, and errors, dumps and profiles
//! name instructions), so the parser applies the same renaming.

use hashbrown::{HashMap, HashSet};

/// XLA's per-base numbering (`NameUniquer`).
#[derive(Debug, Default)]
pub(crate) struct NameUniquer {
    bases: HashMap<String, Numbers>,
}

/// The numbers taken for one base, and where the search for a free one resumes.
#[derive(Debug, Default)]
struct Numbers {
    used: HashSet<u64>,
    next: u64,
}

impl NameUniquer {
    /// The unique name for `name`: `name` itself unless an earlier name took its number.
    pub(crate) fn unique(&mut self, name: &str) -> String {
        // A numeric suffix counts only after a separator in the middle of the name.
        let split = name
            .rsplit_once('.')
            .filter(|(base, suffix)| !base.is_empty() && !suffix.is_empty())
            .and_then(|(base, suffix)| {
                let all_digits = suffix.bytes().all(|b| b.is_ascii_digit());
                // XLA reads the number as an int64.
                all_digits
                    .then(|| suffix.parse::<i64>().ok())
                    .flatten()
                    .map(|n| (base, n as u64))
            });
        let (base, wanted) = split.unwrap_or((name, 0));
        let numbers = self.bases.entry_ref(base).or_default();
        let n = if numbers.used.insert(wanted) {
            wanted
        } else {
            while !numbers.used.insert(numbers.next) {
                numbers.next += 1;
            }
            numbers.next += 1;
            numbers.next - 1
        };
        match (n, split.is_some()) {
            (0, false) => base.to_string(),
            _ => format!("{base}.{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names XLA (jaxlib 0.10.2's `hlo_module_from_text`) gave a module with `a`, `b` and
    /// `s` in three computations and a `s.1` of its own: `add { a b s } add.1 { a.1 b s }
    /// main { a s.1 ... s }`.
    #[test]
    fn renames_as_xla_does() {
        let mut u = NameUniquer::default();
        let got: Vec<String> = ["a", "b", "s", "a.1", "b", "s", "a", "z", "s.1", "s"]
            .iter()
            .map(|n| u.unique(n))
            .collect();
        assert_eq!(
            got,
            ["a", "b", "s", "a.1", "b.1", "s.1", "a.2", "z", "s.2", "s.3"]
        );
    }

    #[test]
    fn suffixes_that_are_not_numbers_are_part_of_the_name() {
        let mut u = NameUniquer::default();
        assert_eq!(u.unique("x.y"), "x.y");
        assert_eq!(u.unique("x.y"), "x.y.1");
        assert_eq!(u.unique(".5"), ".5");
        assert_eq!(u.unique("x."), "x.");
        assert_eq!(u.unique("x.0"), "x.0");
        assert_eq!(u.unique("x"), "x.1");
        assert_eq!(u.unique("x.1"), "x.2");
        assert_eq!(
            u.unique("x.99999999999999999999999"),
            "x.99999999999999999999999"
        );
    }
}
