//! A short text rendering of a `tf.train.Example` (what `tessel data inspect` prints): each
//! feature's name, type, length and first values.

use super::proto::{Example, FeatureKind};
use std::fmt::Write;

/// How many values of each feature are shown.
const SHOWN: usize = 8;

/// One line per feature, sorted by name, each indented by two spaces:
/// `label: int64_list[1] 5`, `image_raw: bytes_list[1] <784 bytes: 00 00 ...>`.
pub fn describe(example: &Example) -> String {
    let mut out = String::new();
    let Some(features) = &example.features else {
        return "  (no features)\n".to_string();
    };
    for (name, feature) in &features.feature {
        let Some(kind) = &feature.kind else {
            let _ = writeln!(out, "  {name}: empty");
            continue;
        };
        let values: Vec<String> = match kind {
            FeatureKind::BytesList(l) => l.value.iter().take(SHOWN).map(|b| bytes(b)).collect(),
            FeatureKind::FloatList(l) => {
                l.value.iter().take(SHOWN).map(|v| format!("{v}")).collect()
            }
            FeatureKind::Int64List(l) => {
                l.value.iter().take(SHOWN).map(|v| format!("{v}")).collect()
            }
        };
        let more = if kind.len() > SHOWN { " ..." } else { "" };
        let _ = writeln!(
            out,
            "  {name}: {}[{}] {}{more}",
            kind.type_name(),
            kind.len(),
            values.join(" ")
        );
    }
    out
}

/// A byte string: printable ASCII quoted, anything else as its length and first bytes in hex.
fn bytes(b: &[u8]) -> String {
    if !b.is_empty() && b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') {
        return format!("{:?}", String::from_utf8_lossy(b));
    }
    let hex: Vec<String> = b.iter().take(SHOWN).map(|c| format!("{c:02x}")).collect();
    let more = if b.len() > SHOWN { " ..." } else { "" };
    format!("<{} bytes: {}{more}>", b.len(), hex.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::example::Feature;

    #[test]
    fn shows_type_length_and_first_values() {
        let e = Example::from_features([
            ("image_raw".into(), Feature::bytes(vec![(0..10).collect()])),
            ("label".into(), Feature::int64s(vec![5])),
            ("name".into(), Feature::bytes(vec![b"seven".to_vec()])),
            (
                "x".into(),
                Feature::floats((0..10).map(|i| i as f32).collect()),
            ),
        ]);
        assert_eq!(
            describe(&e),
            "  image_raw: bytes_list[1] <10 bytes: 00 01 02 03 04 05 06 07 ...>\n\
             \x20 label: int64_list[1] 5\n\
             \x20 name: bytes_list[1] \"seven\"\n\
             \x20 x: float_list[10] 0 1 2 3 4 5 6 7 ...\n"
        );
    }
}
