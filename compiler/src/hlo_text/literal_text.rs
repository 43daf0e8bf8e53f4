//! Constants in HLO text: `constant(0.5)`, `constant({1, 2})`, `constant({ {1, 2}, {3, 4} })`,
//! `-inf`, `nan`, `-nan(0x1)`, `true`. Floats print as the shortest decimal that parses back to
//! the same bits, in C's `%g` style as XLA prints them (`1e-05`, `0.1`, `-0`).

use super::lexer::{Cursor, PResult};
use crate::ir::{Array, ArrayData, ArrayShape, ElementType, Literal, Shape};
use half::{bf16, f16};

/// Parses the literal inside `constant(...)` for a value of `shape`.
pub(crate) fn parse_literal(c: &mut Cursor, shape: &Shape) -> PResult<Literal> {
    match shape {
        Shape::Token => Err(c.error("a constant cannot have a token shape")),
        Shape::Tuple(elems) => {
            c.expect("(")?;
            let mut out = Vec::with_capacity(elems.len());
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    c.expect(",")?;
                }
                out.push(parse_literal(c, e)?);
            }
            c.expect(")")?;
            Ok(Literal::Tuple(out))
        }
        Shape::Array(a) => parse_array(c, a).map(Literal::Array),
    }
}

fn parse_array(c: &mut Cursor, shape: &ArrayShape) -> PResult<Array> {
    if !shape.is_static() {
        return Err(c.error("a constant must have a static shape"));
    }
    // Check the element count fits before anything is stored (the text bounds the real size).
    let mut count: i64 = 1;
    for &d in &shape.dims {
        count = count
            .checked_mul(d)
            .ok_or_else(|| c.error("constant shape has too many elements"))?;
    }
    let mut tokens: Vec<(&str, usize)> = Vec::new();
    if shape.rank() == 0 {
        tokens.push(scalar_token(c)?);
    } else {
        parse_nested(c, &shape.dims, 0, &mut tokens)?;
    }
    let ty = shape.element_type;
    let data = match ty {
        ElementType::Pred => ArrayData::Pred(convert(c, &tokens, parse_pred)?),
        ElementType::S8 => ArrayData::S8(convert(c, &tokens, parse_int::<i8>)?),
        ElementType::U8 => ArrayData::U8(convert(c, &tokens, parse_int::<u8>)?),
        ElementType::S16 => ArrayData::S16(convert(c, &tokens, parse_int::<i16>)?),
        ElementType::U16 => ArrayData::U16(convert(c, &tokens, parse_int::<u16>)?),
        ElementType::S32 => ArrayData::S32(convert(c, &tokens, parse_int::<i32>)?),
        ElementType::U32 => ArrayData::U32(convert(c, &tokens, parse_int::<u32>)?),
        ElementType::S64 => ArrayData::S64(convert(c, &tokens, parse_int::<i64>)?),
        ElementType::U64 => ArrayData::U64(convert(c, &tokens, parse_int::<u64>)?),
        ElementType::F16 => ArrayData::F16(convert(c, &tokens, |s| {
            parse_float_bits(s, FloatFormat::F16).map(|b| f16::from_bits(b as u16))
        })?),
        ElementType::BF16 => ArrayData::BF16(convert(c, &tokens, |s| {
            parse_float_bits(s, FloatFormat::BF16).map(|b| bf16::from_bits(b as u16))
        })?),
        ElementType::F32 => ArrayData::F32(convert(c, &tokens, |s| {
            parse_float_bits(s, FloatFormat::F32).map(|b| f32::from_bits(b as u32))
        })?),
        ElementType::F64 => ArrayData::F64(convert(c, &tokens, |s| {
            parse_float_bits(s, FloatFormat::F64).map(f64::from_bits)
        })?),
    };
    Ok(Array {
        shape: ArrayShape::new(ty, &shape.dims),
        data,
    })
}

fn convert<T>(
    c: &Cursor,
    tokens: &[(&str, usize)],
    f: impl Fn(&str) -> Result<T, String>,
) -> PResult<Vec<T>> {
    tokens
        .iter()
        .map(|&(s, at)| f(s).map_err(|m| c.error_at(at, m)))
        .collect()
}

/// `{a, b, ...}` for dimension `level`, nested for the inner dimensions.
fn parse_nested<'a>(
    c: &mut Cursor<'a>,
    dims: &[i64],
    level: usize,
    out: &mut Vec<(&'a str, usize)>,
) -> PResult<()> {
    c.skip_ws();
    let open = c.pos;
    c.expect("{")?;
    let mut n: i64 = 0;
    if !c.eat("}") {
        loop {
            if level + 1 < dims.len() {
                parse_nested(c, dims, level + 1, out)?;
            } else {
                out.push(scalar_token(c)?);
            }
            n += 1;
            if c.eat("}") {
                break;
            }
            if !c.eat(",") {
                return Err(c.error(format!(
                    "expected `,` or `}}` in a constant, found {}",
                    c.describe_next()
                )));
            }
        }
    }
    if n != dims[level] {
        return Err(c.error_at(
            open,
            format!(
                "constant has {n} elements in dimension {level} but its shape says {}",
                dims[level]
            ),
        ));
    }
    Ok(())
}

/// One scalar's text: `-1.5e-05`, `inf`, `-nan(0x7f)`, `true`.
fn scalar_token<'a>(c: &mut Cursor<'a>) -> PResult<(&'a str, usize)> {
    c.skip_ws();
    let start = c.pos;
    if matches!(c.peek(), Some(b'-' | b'+')) {
        c.pos += 1;
    }
    let w = c.word();
    if w.is_empty() {
        c.pos = start;
        return Err(c.error(format!("expected a number, found {}", c.describe_next())));
    }
    if c.peek() == Some(b'+') && (w.ends_with('e') || w.ends_with('E')) {
        // The exponent sign of `1e+06`.
        c.pos += 1;
        c.word();
    }
    if c.peek() == Some(b'(') {
        // `nan(0x...)`: a NaN payload.
        let Some(close) = c.rest().find(')') else {
            return Err(c.error("unterminated `(` in a NaN payload"));
        };
        c.pos += close + 1;
    }
    Ok((&c.text[start..c.pos], start))
}

fn parse_pred(s: &str) -> Result<bool, String> {
    match s {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("expected `true` or `false`, found `{s}`")),
    }
}

fn parse_int<T: TryFrom<i128>>(s: &str) -> Result<T, String> {
    let v: i128 = s
        .strip_prefix('+')
        .unwrap_or(s)
        .parse()
        .map_err(|_| format!("expected an integer, found `{s}`"))?;
    T::try_from(v).map_err(|_| format!("{s} is out of range for {}", std::any::type_name::<T>()))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum FloatFormat {
    F16,
    BF16,
    F32,
    F64,
}

impl FloatFormat {
    fn mantissa_bits(self) -> u32 {
        match self {
            FloatFormat::F16 => 10,
            FloatFormat::BF16 => 7,
            FloatFormat::F32 => 23,
            FloatFormat::F64 => 52,
        }
    }

    fn total_bits(self) -> u32 {
        match self {
            FloatFormat::F16 | FloatFormat::BF16 => 16,
            FloatFormat::F32 => 32,
            FloatFormat::F64 => 64,
        }
    }

    fn exponent_mask(self) -> u64 {
        let exp_bits = self.total_bits() - 1 - self.mantissa_bits();
        ((1u64 << exp_bits) - 1) << self.mantissa_bits()
    }

    fn sign_bit(self) -> u64 {
        1u64 << (self.total_bits() - 1)
    }

    /// Bits of the value nearest to the decimal `v`.
    fn bits_of_decimal(self, s: &str) -> Option<u64> {
        Some(match self {
            FloatFormat::F32 => s.parse::<f32>().ok()?.to_bits() as u64,
            FloatFormat::F64 => s.parse::<f64>().ok()?.to_bits(),
            FloatFormat::F16 => f16::from_f64(s.parse::<f64>().ok()?).to_bits() as u64,
            FloatFormat::BF16 => bf16::from_f64(s.parse::<f64>().ok()?).to_bits() as u64,
        })
    }
}

/// Parses a float's text into the bits of `format`.
fn parse_float_bits(s: &str, format: FloatFormat) -> Result<u64, String> {
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let sign = if negative { format.sign_bit() } else { 0 };
    let quiet = 1u64 << (format.mantissa_bits() - 1);
    if body == "nan" {
        return Ok(sign | format.exponent_mask() | quiet);
    }
    if let Some(payload) = body.strip_prefix("nan(").and_then(|p| p.strip_suffix(')')) {
        let hex = payload.strip_prefix("0x").unwrap_or(payload);
        let p = u64::from_str_radix(hex, 16).map_err(|_| format!("bad NaN payload `{s}`"))?;
        let mask = (1u64 << format.mantissa_bits()) - 1;
        if p == 0 || p & !mask != 0 {
            return Err(format!("NaN payload out of range in `{s}`"));
        }
        return Ok(sign | format.exponent_mask() | p);
    }
    if body == "inf" {
        return Ok(sign | format.exponent_mask());
    }
    // Rust's float parser takes `1e-05`, `1.`, `.5`; reject its `infinity`/`NaN` spellings
    // so that only XLA's forms are accepted.
    let is_decimal = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && body.bytes().any(|b| b.is_ascii_digit());
    if !is_decimal {
        return Err(format!("expected a number, found `{s}`"));
    }
    format
        .bits_of_decimal(s)
        .ok_or_else(|| format!("expected a number, found `{s}`"))
}

/// The text of a literal as it appears inside `constant(...)`.
pub(crate) fn literal_to_text(l: &Literal) -> String {
    let mut out = String::new();
    write_literal(&mut out, l);
    out
}

fn write_literal(out: &mut String, l: &Literal) {
    match l {
        Literal::Token => out.push_str("token"),
        Literal::Tuple(elems) => {
            out.push('(');
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(out, e);
            }
            out.push(')');
        }
        Literal::Array(a) => write_array(out, a),
    }
}

fn write_array(out: &mut String, a: &Array) {
    let dims = &a.shape.dims;
    if dims.is_empty() {
        if !a.data.is_empty() {
            out.push_str(&element_text(&a.data, 0));
        }
        return;
    }
    let count = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?));
    if count != Some(a.data.len()) {
        // An array whose data does not fill its shape (a bug elsewhere): show the data flat
        // rather than walk a shape that may be huge.
        let items: Vec<String> = (0..a.data.len())
            .map(|i| element_text(&a.data, i))
            .collect();
        out.push_str(&format!("{{{}}}", items.join(", ")));
        return;
    }
    let mut index = 0usize;
    write_level(out, &a.data, dims, 0, &mut index);
}

/// XLA's one-line form: `{1, 2}` innermost, `{ {1, 2}, {3, 4} }` around it.
fn write_level(out: &mut String, data: &ArrayData, dims: &[i64], level: usize, index: &mut usize) {
    let n = dims[level].max(0) as usize;
    let innermost = level + 1 == dims.len();
    if n == 0 {
        out.push_str("{}");
        return;
    }
    out.push_str(if innermost { "{" } else { "{ " });
    for i in 0..n {
        if i > 0 {
            out.push_str(", ");
        }
        if innermost {
            if *index < data.len() {
                out.push_str(&element_text(data, *index));
            }
            *index += 1;
        } else {
            write_level(out, data, dims, level + 1, index);
        }
    }
    out.push_str(if innermost { "}" } else { " }" });
}

fn element_text(data: &ArrayData, i: usize) -> String {
    match data {
        ArrayData::Pred(v) => v[i].to_string(),
        ArrayData::S8(v) => v[i].to_string(),
        ArrayData::U8(v) => v[i].to_string(),
        ArrayData::S16(v) => v[i].to_string(),
        ArrayData::U16(v) => v[i].to_string(),
        ArrayData::S32(v) => v[i].to_string(),
        ArrayData::U32(v) => v[i].to_string(),
        ArrayData::S64(v) => v[i].to_string(),
        ArrayData::U64(v) => v[i].to_string(),
        ArrayData::F16(v) => float_text(v[i].to_bits() as u64, FloatFormat::F16),
        ArrayData::BF16(v) => float_text(v[i].to_bits() as u64, FloatFormat::BF16),
        ArrayData::F32(v) => float_text(v[i].to_bits() as u64, FloatFormat::F32),
        ArrayData::F64(v) => float_text(v[i].to_bits(), FloatFormat::F64),
    }
}

/// The shortest text that parses back to exactly `bits`.
fn float_text(bits: u64, format: FloatFormat) -> String {
    let negative = bits & format.sign_bit() != 0;
    let sign = if negative { "-" } else { "" };
    let mantissa = bits & ((1u64 << format.mantissa_bits()) - 1);
    if bits & format.exponent_mask() == format.exponent_mask() {
        if mantissa == 0 {
            return format!("{sign}inf");
        }
        if mantissa == 1u64 << (format.mantissa_bits() - 1) {
            return format!("{sign}nan");
        }
        return format!("{sign}nan(0x{mantissa:x})");
    }
    // Rust's `{:e}` gives the shortest round-tripping digits for f32 and f64.
    let sci = match format {
        FloatFormat::F32 => format!("{:e}", f32::from_bits(bits as u32)),
        FloatFormat::F64 => format!("{:e}", f64::from_bits(bits)),
        FloatFormat::F16 | FloatFormat::BF16 => {
            let v = if format == FloatFormat::F16 {
                f16::from_bits(bits as u16).to_f64()
            } else {
                bf16::from_bits(bits as u16).to_f64()
            };
            (0..17)
                .map(|p| format!("{v:.p$e}"))
                .find(|s| format.bits_of_decimal(s) == Some(bits))
                .unwrap_or_else(|| format!("{v:e}"))
        }
    };
    let precision = match format {
        FloatFormat::F64 => (15, 17),
        _ => (6, 9),
    };
    g_style(&sci, precision)
}

/// Rewrites Rust's `{:e}` output (`-1.5e-5`) in C's `%g` style (`-1.5e-05`), choosing fixed
/// notation for exponents in `-4..P` where P is XLA's precision (`(short, long)` digits).
fn g_style(sci: &str, precision: (i32, i32)) -> String {
    let (mant, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mant) = match mant.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mant),
    };
    let mut digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    let p = if digits.len() as i32 <= precision.0 {
        precision.0
    } else {
        precision.1
    };
    if exp < -4 || exp >= p {
        let (head, tail) = digits.split_at(1);
        let tail = if tail.is_empty() {
            String::new()
        } else {
            format!(".{tail}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{head}{tail}e{esign}{:02}", exp.abs())
    } else if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        format!("{sign}0.{zeros}{digits}")
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            let zeros = "0".repeat(int_len - digits.len());
            format!("{sign}{digits}{zeros}")
        } else {
            let (i, f) = digits.split_at(int_len);
            format!("{sign}{i}.{f}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip_f32(x: f32) {
        let text = float_text(x.to_bits() as u64, FloatFormat::F32);
        let back = parse_float_bits(&text, FloatFormat::F32).unwrap();
        assert_eq!(back as u32, x.to_bits(), "{x:?} printed as {text}");
    }

    #[test]
    fn floats_print_like_xla() {
        let t = |x: f32| float_text(x.to_bits() as u64, FloatFormat::F32);
        assert_eq!(t(0.5), "0.5");
        assert_eq!(t(1e-5), "1e-05");
        assert_eq!(t(-0.0078125), "-0.0078125");
        assert_eq!(t(-0.0), "-0");
        assert_eq!(t(1.0), "1");
        assert_eq!(t(100000.0), "100000");
        assert_eq!(t(1e6), "1e+06");
        assert_eq!(t(16777216.0), "16777216");
        assert_eq!(t(f32::NEG_INFINITY), "-inf");
        assert_eq!(t(f32::NAN), "nan");
        assert_eq!(t(0.1), "0.1");
    }

    #[test]
    fn f32_round_trips_exactly() {
        let mut bits: u32 = 0x1234_5678;
        for _ in 0..20000 {
            // xorshift over all bit patterns, NaNs included
            bits ^= bits << 13;
            bits ^= bits >> 17;
            bits ^= bits << 5;
            round_trip_f32(f32::from_bits(bits));
        }
        for x in [f32::MIN_POSITIVE, f32::MAX, f32::MIN, 1.0e-45, -0.0, 3.0e38] {
            round_trip_f32(x);
        }
        round_trip_f32(f32::from_bits(0xffc0_0001));
    }

    #[test]
    fn half_types_round_trip() {
        for b in (0..=u16::MAX).step_by(7) {
            for format in [FloatFormat::F16, FloatFormat::BF16] {
                let text = float_text(b as u64, format);
                let back = parse_float_bits(&text, format).unwrap();
                assert_eq!(back, b as u64, "{format:?} {b:#x} printed as {text}");
            }
        }
    }

    #[test]
    fn f64_round_trips() {
        for x in [0.1f64, 1e-300, 123456789.12345679, -2.5e100, 5e-324] {
            let text = float_text(x.to_bits(), FloatFormat::F64);
            assert_eq!(
                parse_float_bits(&text, FloatFormat::F64).unwrap(),
                x.to_bits()
            );
        }
    }
}
