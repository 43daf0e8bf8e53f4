//! Deterministic mutators for HLO text and safetensors bytes, driven by a small seeded PRNG so
//! that a case number and a seed reproduce a mutant exactly on any machine.

/// SplitMix64: tiny, seedable, and good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Numbers that break arithmetic: zero, signs, 32- and 64-bit edges, more than 64 bits.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "7",
    "255",
    "4096",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "4294967296",
    "1000000000000",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e308",
    "1e999",
    "nan",
    "inf",
    "-inf",
];

/// Bytes that the HLO grammar gives a meaning to.
const SYNTAX: &[&str] = &[
    "{", "}", "(", ")", "[", "]", ",", "=", "\"", "-", "%", "/*", "*/", "<=", "?", "->", ":",
    "ROOT ", "\n", " ", "\\", "0x", "_", ".", "e+", "\u{0}", "\u{feff}",
];

/// A byte range of `text` that is one token: a run of word characters or one other byte.
fn token_at(text: &[u8], at: usize) -> (usize, usize) {
    let word = |b: u8| b.is_ascii_alphanumeric() || b"_.-%".contains(&b);
    if text.is_empty() {
        return (0, 0);
    }
    let at = at.min(text.len() - 1);
    if !word(text[at]) {
        return (at, at + 1);
    }
    let mut start = at;
    while start > 0 && word(text[start - 1]) {
        start -= 1;
    }
    let mut end = at;
    while end < text.len() && word(text[end]) {
        end += 1;
    }
    (start, end)
}

fn line_spans(text: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, &b) in text.iter().enumerate() {
        if b == b'\n' {
            spans.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < text.len() {
        spans.push((start, text.len()));
    }
    spans
}

fn splice(text: &mut Vec<u8>, start: usize, end: usize, with: &[u8]) {
    text.splice(start..end, with.iter().copied());
}

/// Applies one to three mutations (most often one) to `text`; `donors` are the other corpus files (token
/// splicing). Returns a short description of what was done, for the failure report.
pub fn mutate_hlo(rng: &mut Rng, text: &mut Vec<u8>, donors: &[Vec<u8>]) -> String {
    let mut what = Vec::new();
    for _ in 0..[1, 1, 1, 2, 3][rng.below(5)] {
        if text.is_empty() {
            text.extend_from_slice(b"HloModule m\n");
        }
        let at = rng.below(text.len());
        match rng.below(11) {
            0 => {
                let b = if rng.below(4) == 0 {
                    rng.below(256) as u8
                } else {
                    *rng.pick(b"{}()[],=\"-%:?<>/*0123456789 \nx")
                };
                text[at] = b;
                what.push(format!("byte {at} := {b:#04x}"));
            }
            1 => {
                let end = (at + 1 + rng.below(64)).min(text.len());
                text.drain(at..end);
                what.push(format!("delete {at}..{end}"));
            }
            2 | 3 => {
                let lines = line_spans(text);
                let (s, e) = *rng.pick(&lines);
                let (to, _) = *rng.pick(&lines);
                let copy = text[s..e].to_vec();
                let times = if rng.below(8) == 0 {
                    1 + rng.below(50)
                } else {
                    1
                };
                for _ in 0..times {
                    splice(text, to, to, &copy);
                }
                what.push(format!("line {s}..{e} copied {times}x to {to}"));
            }
            4 => {
                let lines = line_spans(text);
                let (s, e) = *rng.pick(&lines);
                text.drain(s..e);
                what.push(format!("line {s}..{e} deleted"));
            }
            5 | 6 => {
                let donor = rng.pick(donors);
                if donor.is_empty() {
                    continue;
                }
                let (ds, de) = token_at(donor, rng.below(donor.len()));
                let (s, e) = token_at(text, at);
                let token = donor[ds..de].to_vec();
                splice(text, s, e, &token);
                what.push(format!(
                    "token {s}..{e} := {:?}",
                    String::from_utf8_lossy(&token)
                ));
            }
            7 => {
                let depth = *rng.pick(&[10, 100, 1_000, 5_000, 20_000, 100_000]);
                let (open, close) = *rng.pick(&[("(", ")"), ("{", "}"), ("[", "]"), ("(", "")]);
                let mut nest = open.repeat(depth).into_bytes();
                let inner = nest.len();
                nest.extend(close.repeat(depth).bytes());
                let (s, e) = token_at(text, at);
                let token = text[s..e].to_vec();
                nest.splice(inner..inner, token);
                splice(text, s, e, &nest);
                what.push(format!("token at {s} nested {depth} deep in {open}{close}"));
            }
            8 => {
                // A number inside a shape's brackets, when there is one after `at`.
                let Some(open) = text[at..].iter().position(|&b| b == b'[') else {
                    continue;
                };
                let s = at + open + 1;
                if !text.get(s).is_some_and(|b| b.is_ascii_digit()) {
                    continue;
                }
                let e = s + text[s..].iter().take_while(|b| b.is_ascii_digit()).count();
                let n = rng.pick(NUMBERS);
                splice(text, s, e, n.as_bytes());
                what.push(format!("shape dim at {s} := {n}"));
            }
            9 => {
                let Some(d) = text[at..].iter().position(|b| b.is_ascii_digit()) else {
                    continue;
                };
                let (s, e) = token_at(text, at + d);
                let n = rng.pick(NUMBERS);
                splice(text, s, e, n.as_bytes());
                what.push(format!("number {s}..{e} := {n}"));
            }
            _ => {
                let s = rng.pick(SYNTAX);
                splice(text, at, at, s.as_bytes());
                what.push(format!("insert {s:?} at {at}"));
            }
        }
    }
    what.join("; ")
}

/// Applies one to three mutations to safetensors bytes: most land in the 8-byte length and the
/// JSON header, where the reader's checks are.
pub fn mutate_safetensors(rng: &mut Rng, bytes: &mut Vec<u8>) -> String {
    let mut what = Vec::new();
    for _ in 0..1 + rng.below(3) {
        if bytes.is_empty() {
            what.push("empty".to_string());
            break;
        }
        let header_end = if bytes.len() >= 8 {
            let len = u64::from_le_bytes(bytes[..8].try_into().unwrap());
            8usize
                .saturating_add(len.min(usize::MAX as u64) as usize)
                .min(bytes.len())
        } else {
            bytes.len()
        };
        let in_header = rng.below(bytes.len().min(header_end).max(1));
        match rng.below(8) {
            0 => {
                let b = rng.below(256) as u8;
                bytes[in_header] = b;
                what.push(format!("byte {in_header} := {b:#04x}"));
            }
            1 => {
                let at = rng.below(8.min(bytes.len()));
                let b = *rng.pick(&[0u8, 1, 0x7f, 0x80, 0xff]);
                bytes[at] = b;
                what.push(format!("length byte {at} := {b:#04x}"));
            }
            2 | 3 => {
                let Some(d) = bytes[in_header..header_end.max(in_header)]
                    .iter()
                    .position(|b| b.is_ascii_digit())
                else {
                    continue;
                };
                let (s, e) = token_at(bytes, in_header + d);
                let n = rng.pick(NUMBERS);
                splice(bytes, s, e, n.as_bytes());
                what.push(format!(
                    "header number {s}..{e} := {n} (length not updated)"
                ));
            }
            4 => {
                // A header edit with the length prefix kept right, so the JSON is what is tested.
                let Some(d) = bytes[in_header..header_end.max(in_header)]
                    .iter()
                    .position(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
                else {
                    continue;
                };
                let (s, e) = token_at(bytes, in_header + d);
                let with = if bytes[s].is_ascii_digit() {
                    rng.pick(NUMBERS).to_string()
                } else {
                    rng.pick(&["F32", "F64", "I64", "BOOL", "F8_E4M3", "U1", "X", ""])
                        .to_string()
                };
                let before = bytes.len();
                splice(bytes, s, e, with.as_bytes());
                let len = (header_end + bytes.len()) as i64 - before as i64 - 8;
                if bytes.len() >= 8 && len >= 0 {
                    bytes[..8].copy_from_slice(&(len as u64).to_le_bytes());
                }
                what.push(format!("header token {s}..{e} := {with:?} (length kept)"));
            }
            5 => {
                let cut = rng.below(bytes.len());
                bytes.truncate(cut);
                what.push(format!("truncated to {cut}"));
            }
            6 => {
                let n = 1 + rng.below(64);
                bytes.extend((0..n).map(|_| rng.below(256) as u8));
                what.push(format!("{n} bytes appended"));
            }
            _ => {
                let at = rng.below(bytes.len());
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(at..end);
                what.push(format!("delete {at}..{end}"));
            }
        }
    }
    what.join("; ")
}
