//! `XLA_FLAGS=--xla_disable_hlo_passes=a,b`: optimization passes a TF user turns off, e.g.
//! `all-reduce-combiner` to compare a step with and without it. The estimator's device skips
//! them (`Device::disabled_passes`); a name the pipeline does not have fails the compile.

/// The passes named by `--xla_disable_hlo_passes` in `XLA_FLAGS`, if any.
pub(crate) fn from_env() -> Vec<String> {
    std::env::var("XLA_FLAGS")
        .map(|f| parse(&f))
        .unwrap_or_default()
}

/// `--xla_disable_hlo_passes=a,b` (or `--xla_disable_hlo_passes a,b`) in an `XLA_FLAGS` value.
fn parse(flags: &str) -> Vec<String> {
    let mut words = flags.split_whitespace();
    let mut out = Vec::new();
    while let Some(w) = words.next() {
        let list = match w.strip_prefix("--xla_disable_hlo_passes") {
            Some(rest) if rest.starts_with('=') => &rest[1..],
            Some("") => words.next().unwrap_or(""),
            _ => continue,
        };
        out.extend(
            list.split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_string),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn reads_the_pass_list_in_both_spellings() {
        assert_eq!(
            parse("--xla_dump_to=/tmp/d --xla_disable_hlo_passes=all-reduce-combiner,cse"),
            vec!["all-reduce-combiner", "cse"]
        );
        assert_eq!(parse("--xla_disable_hlo_passes dce"), vec!["dce"]);
        assert!(parse("--xla_dump_to=/tmp/d").is_empty());
        assert!(parse("").is_empty());
    }
}
