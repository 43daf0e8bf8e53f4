//! Attribute values of HLO text: parsing from a cursor over the value, and printing back.

use super::lexer::{Cursor, PResult};
use crate::ir::{
    ConvDimensionNumbers, Metadata, PadDim, ReplicaGroups, SliceDim, SourceLocation, Window,
    WindowDim,
};
use std::fmt::Write;

/// `{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}`.
pub(crate) fn parse_window(c: &mut Cursor) -> PResult<Window> {
    c.expect("{")?;
    let mut dims: Option<Vec<WindowDim>> = None;
    type Setter = fn(&mut WindowDim, &[i64]);
    /// A field read before all were seen: (name, position, items, setter, numbers per item).
    type Pending<'k> = (&'k str, usize, Vec<Vec<i64>>, Setter, usize);
    let mut pending: Vec<Pending> = Vec::new();
    loop {
        if c.eat("}") {
            break;
        }
        let (key, key_at) = c.name("a window field")?;
        c.expect("=")?;
        let value_at = c.pos;
        // Each field is `x`-separated items; `pad` items are `lo_hi`.
        let mut items = Vec::new();
        loop {
            let mut parts = vec![c.int()?];
            while c.peek() == Some(b'_') {
                c.pos += 1;
                parts.push(c.int()?);
            }
            items.push(parts);
            if c.peek() == Some(b'x') {
                c.pos += 1;
            } else {
                break;
            }
        }
        let (setter, arity): (Setter, usize) = match key {
            "size" => (|d, v| d.size = v[0], 1),
            "stride" => (|d, v| d.stride = v[0], 1),
            "pad" => (
                |d, v| {
                    d.pad_low = v[0];
                    d.pad_high = v[1];
                },
                2,
            ),
            "lhs_dilate" => (|d, v| d.base_dilation = v[0], 1),
            "rhs_dilate" => (|d, v| d.window_dilation = v[0], 1),
            "rhs_reversal" => (|d, v| d.reversal = v[0] != 0, 1),
            other => {
                return Err(c.error_at(key_at, format!("unknown window field `{other}`")));
            }
        };
        if key == "size" {
            dims = Some(items.iter().map(|v| WindowDim::new(v[0])).collect());
        } else {
            pending.push((key, value_at, items, setter, arity));
        }
    }
    let Some(mut dims) = dims else {
        if let Some((_, at, ..)) = pending.first() {
            return Err(c.error_at(*at, "window has no `size` field"));
        }
        return Ok(Window::default());
    };
    for (key, at, items, setter, arity) in pending {
        if items.len() != dims.len() {
            return Err(c.error_at(
                at,
                format!(
                    "window `{key}` has {} dimension(s) but `size` has {}",
                    items.len(),
                    dims.len()
                ),
            ));
        }
        for (d, v) in dims.iter_mut().zip(&items) {
            if v.len() != arity {
                return Err(c.error_at(
                    at,
                    format!("expected {arity} number(s) per window dimension"),
                ));
            }
            setter(d, v);
        }
    }
    Ok(Window { dims })
}

pub(crate) fn window_to_text(w: &Window) -> String {
    let join =
        |f: &dyn Fn(&WindowDim) -> String| w.dims.iter().map(f).collect::<Vec<_>>().join("x");
    let mut parts = vec![format!("size={}", join(&|d| d.size.to_string()))];
    if w.dims.iter().any(|d| d.stride != 1) {
        parts.push(format!("stride={}", join(&|d| d.stride.to_string())));
    }
    if w.dims.iter().any(|d| d.pad_low != 0 || d.pad_high != 0) {
        parts.push(format!(
            "pad={}",
            join(&|d| format!("{}_{}", d.pad_low, d.pad_high))
        ));
    }
    if w.dims.iter().any(|d| d.base_dilation != 1) {
        parts.push(format!(
            "lhs_dilate={}",
            join(&|d| d.base_dilation.to_string())
        ));
    }
    if w.dims.iter().any(|d| d.window_dilation != 1) {
        parts.push(format!(
            "rhs_dilate={}",
            join(&|d| d.window_dilation.to_string())
        ));
    }
    if w.dims.iter().any(|d| d.reversal) {
        parts.push(format!(
            "rhs_reversal={}",
            join(&|d| (d.reversal as i32).to_string())
        ));
    }
    if w.dims.is_empty() {
        return "{}".to_string();
    }
    format!("{{{}}}", parts.join(" "))
}

/// `b01f_01io->b01f`: roles of each dimension of input, kernel and output.
pub(crate) fn parse_dim_labels(c: &mut Cursor) -> PResult<ConvDimensionNumbers> {
    c.skip_ws();
    let start = c.pos;
    let text = c.rest().trim_end();
    let bad = |m: &str| c.error_at(start, format!("malformed dim_labels `{text}`: {m}"));
    let (lhs, rest) = text.split_once('_').ok_or_else(|| bad("expected `_`"))?;
    let (rhs, out) = rest.split_once("->").ok_or_else(|| bad("expected `->`"))?;
    let n = lhs.len().saturating_sub(2);
    let roles = |labels: &str, a: char, b: char| -> Result<(i64, i64, Vec<i64>), String> {
        if labels.len() != n + 2 {
            return Err(format!(
                "`{labels}` has {} labels, expected {}",
                labels.len(),
                n + 2
            ));
        }
        let (mut pa, mut pb) = (None, None);
        let mut spatial = vec![None; n];
        for (i, ch) in labels.chars().enumerate() {
            let slot = if ch == a {
                &mut pa
            } else if ch == b {
                &mut pb
            } else if let Some(d) = ch.to_digit(10).filter(|&d| (d as usize) < n) {
                &mut spatial[d as usize]
            } else {
                return Err(format!("unexpected label `{ch}` in `{labels}`"));
            };
            if slot.replace(i as i64).is_some() {
                return Err(format!("label `{ch}` repeated in `{labels}`"));
            }
        }
        let missing = || format!("`{labels}` lacks a label");
        Ok((
            pa.ok_or_else(missing)?,
            pb.ok_or_else(missing)?,
            spatial
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .ok_or_else(missing)?,
        ))
    };
    let (ib, if_, is) = roles(lhs, 'b', 'f').map_err(|m| bad(&m))?;
    let (ki, ko, ks) = roles(rhs, 'i', 'o').map_err(|m| bad(&m))?;
    let (ob, of, os) = roles(out, 'b', 'f').map_err(|m| bad(&m))?;
    c.pos = c.end;
    Ok(ConvDimensionNumbers {
        input_batch: ib,
        input_feature: if_,
        input_spatial: is,
        kernel_input_feature: ki,
        kernel_output_feature: ko,
        kernel_spatial: ks,
        output_batch: ob,
        output_feature: of,
        output_spatial: os,
    })
}

pub(crate) fn dim_labels_to_text(d: &ConvDimensionNumbers) -> String {
    fn labels(a: (i64, char), b: (i64, char), spatial: &[i64]) -> String {
        let n = spatial.len() + 2;
        let mut out = vec!['?'; n];
        let mut put = |i: i64, ch: char| {
            if let Some(slot) = usize::try_from(i).ok().and_then(|i| out.get_mut(i)) {
                *slot = ch;
            }
        };
        put(a.0, a.1);
        put(b.0, b.1);
        for (k, &i) in spatial.iter().enumerate() {
            put(i, char::from_digit(k as u32, 10).unwrap_or('?'));
        }
        out.into_iter().collect()
    }
    format!(
        "{}_{}->{}",
        labels(
            (d.input_batch, 'b'),
            (d.input_feature, 'f'),
            &d.input_spatial
        ),
        labels(
            (d.kernel_input_feature, 'i'),
            (d.kernel_output_feature, 'o'),
            &d.kernel_spatial
        ),
        labels(
            (d.output_batch, 'b'),
            (d.output_feature, 'f'),
            &d.output_spatial
        ),
    )
}

/// `{[0:2], [1:5:2]}`.
pub(crate) fn parse_slice(c: &mut Cursor) -> PResult<Vec<SliceDim>> {
    c.expect("{")?;
    let mut out = Vec::new();
    if c.eat("}") {
        return Ok(out);
    }
    loop {
        c.expect("[")?;
        let start = c.int()?;
        c.expect(":")?;
        let limit = c.int()?;
        let stride = if c.eat(":") { c.int()? } else { 1 };
        c.expect("]")?;
        out.push(SliceDim {
            start,
            limit,
            stride,
        });
        if c.eat("}") {
            return Ok(out);
        }
        c.expect(",")?;
    }
}

pub(crate) fn slice_to_text(dims: &[SliceDim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| {
            if d.stride == 1 {
                format!("[{}:{}]", d.start, d.limit)
            } else {
                format!("[{}:{}:{}]", d.start, d.limit, d.stride)
            }
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// `0_0x1_1_2`: `low_high[_interior]` per dimension.
pub(crate) fn parse_padding(c: &mut Cursor) -> PResult<Vec<PadDim>> {
    let mut out = Vec::new();
    c.skip_ws();
    if c.at_end() {
        return Ok(out);
    }
    loop {
        let at = c.pos;
        let mut parts = vec![c.int()?];
        while c.peek() == Some(b'_') {
            c.pos += 1;
            parts.push(c.int()?);
        }
        let interior = match parts.len() {
            2 => 0,
            3 => parts[2],
            _ => return Err(c.error_at(at, "expected `low_high` or `low_high_interior`")),
        };
        out.push(PadDim {
            low: parts[0],
            high: parts[1],
            interior,
        });
        if c.peek() == Some(b'x') {
            c.pos += 1;
        } else {
            return Ok(out);
        }
    }
}

pub(crate) fn padding_to_text(dims: &[PadDim]) -> String {
    let interior = dims.iter().any(|d| d.interior != 0);
    dims.iter()
        .map(|d| {
            if interior {
                format!("{}_{}_{}", d.low, d.high, d.interior)
            } else {
                format!("{}_{}", d.low, d.high)
            }
        })
        .collect::<Vec<_>>()
        .join("x")
}

/// `{{0,1},{2,3}}`, `{}`, or the iota form `[2,2]<=[4]` / `[2,2]<=[2,2]T(1,0)`.
pub(crate) fn parse_replica_groups(c: &mut Cursor) -> PResult<ReplicaGroups> {
    c.skip_ws();
    if c.peek() == Some(b'[') {
        return parse_iota_groups(c);
    }
    parse_int_list_list(c)
}

/// `{{a,b},{c,d}}` (also used for `source_target_pairs`).
pub(crate) fn parse_int_list_list(c: &mut Cursor) -> PResult<Vec<Vec<i64>>> {
    c.expect("{")?;
    let mut out = Vec::new();
    if c.eat("}") {
        return Ok(out);
    }
    loop {
        out.push(c.int_list_braced()?);
        if c.eat("}") {
            return Ok(out);
        }
        c.expect(",")?;
    }
}

fn bracket_list(c: &mut Cursor) -> PResult<Vec<i64>> {
    c.expect("[")?;
    let mut out = Vec::new();
    loop {
        out.push(c.int()?);
        if c.eat("]") {
            return Ok(out);
        }
        c.expect(",")?;
    }
}

/// The iota form: the devices `0..N` laid out as `reshape_dims`, transposed by `T(...)`,
/// then read row-major as `[groups, group_size]`.
fn parse_iota_groups(c: &mut Cursor) -> PResult<ReplicaGroups> {
    let start = c.pos;
    let dims = bracket_list(c)?;
    c.expect("<=")?;
    let reshape = bracket_list(c)?;
    let perm: Vec<i64> = if c.eat("T") {
        c.expect("(")?;
        let mut p = vec![c.int()?];
        while c.eat(",") {
            p.push(c.int()?);
        }
        c.expect(")")?;
        p
    } else {
        (0..reshape.len() as i64).collect()
    };
    let bad = |m: &str| c.error_at(start, format!("bad iota replica groups: {m}"));
    if dims.len() != 2 || dims.iter().any(|&d| d <= 0) {
        return Err(bad("expected `[groups,group_size]` with positive sizes"));
    }
    let total = reshape
        .iter()
        .try_fold(1i64, |a, &d| if d > 0 { a.checked_mul(d) } else { None })
        .filter(|&t| t <= 1 << 20)
        .ok_or_else(|| bad("bad device count"))?;
    if dims[0].checked_mul(dims[1]) != Some(total) {
        return Err(bad("group sizes do not cover the devices"));
    }
    let mut seen = vec![false; reshape.len()];
    for &p in &perm {
        match usize::try_from(p).ok().and_then(|p| seen.get_mut(p)) {
            Some(s) if !*s => *s = true,
            _ => return Err(bad("`T(...)` is not a permutation")),
        }
    }
    if perm.len() != reshape.len() {
        return Err(bad("`T(...)` is not a permutation"));
    }
    // Strides of the untransposed layout, then walk the transposed index space in order.
    let rank = reshape.len();
    let mut strides = vec![1i64; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * reshape[i + 1];
    }
    let tdims: Vec<i64> = perm.iter().map(|&p| reshape[p as usize]).collect();
    let mut flat = Vec::with_capacity(total as usize);
    let mut idx = vec![0i64; rank];
    for _ in 0..total {
        let device: i64 = (0..rank).map(|k| idx[k] * strides[perm[k] as usize]).sum();
        flat.push(device);
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < tdims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(flat.chunks(dims[1] as usize).map(|g| g.to_vec()).collect())
}

pub(crate) fn int_list_to_text(v: &[i64]) -> String {
    let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", parts.join(","))
}

pub(crate) fn int_list_list_to_text(v: &[Vec<i64>]) -> String {
    let parts: Vec<String> = v.iter().map(|g| int_list_to_text(g)).collect();
    format!("{{{}}}", parts.join(","))
}

/// `{op_type="..." op_name="..." source_file="..." source_line=N source_column=N
/// stack_frame_id=N}`. Other fields XLA may write are skipped.
pub(crate) fn parse_metadata(c: &mut Cursor) -> PResult<Metadata> {
    c.expect("{")?;
    let mut m = Metadata::default();
    let mut file: Option<String> = None;
    let mut line: u32 = 0;
    let mut column: u32 = 0;
    loop {
        if c.eat("}") {
            break;
        }
        let (key, _) = c.name("a metadata field")?;
        c.expect("=")?;
        c.skip_ws();
        match key {
            "op_type" => m.op_type = Some(c.string()?),
            "op_name" => m.op_name = Some(c.string()?),
            "source_file" => file = Some(c.string()?),
            "source_line" => line = c.u32()?,
            "source_column" => column = c.u32()?,
            "stack_frame_id" => m.stack_frame_id = Some(c.u32()?),
            _ => {
                if c.peek() == Some(b'"') {
                    c.string()?;
                } else if c.peek() == Some(b'{') {
                    c.int_list_braced()?;
                } else {
                    if matches!(c.peek(), Some(b'-')) {
                        c.pos += 1;
                    }
                    if c.word().is_empty() {
                        return Err(c.error(format!(
                            "expected a metadata value, found {}",
                            c.describe_next()
                        )));
                    }
                }
            }
        }
    }
    if let Some(file) = file {
        m.source = Some(SourceLocation { file, line, column });
    }
    Ok(m)
}

pub(crate) fn metadata_to_text(m: &Metadata) -> String {
    let mut parts = Vec::new();
    if let Some(t) = &m.op_type {
        parts.push(format!("op_type={}", quote(t)));
    }
    if let Some(n) = &m.op_name {
        parts.push(format!("op_name={}", quote(n)));
    }
    if let Some(s) = &m.source {
        parts.push(format!("source_file={}", quote(&s.file)));
        parts.push(format!("source_line={}", s.line));
        if s.column > 0 {
            parts.push(format!("source_column={}", s.column));
        }
    }
    if let Some(id) = m.stack_frame_id {
        parts.push(format!("stack_frame_id={id}"));
    }
    format!("{{{}}}", parts.join(" "))
}

/// A double-quoted string with C escapes, as XLA's `CEscape` writes it.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            // XLA escapes single quotes too (`p[\'w\']`).
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\{:03o}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `{key=value,key2="v"}` into verbatim `(key, value)` pairs.
pub(crate) fn parse_frontend_attributes(c: &mut Cursor) -> PResult<Vec<(String, String)>> {
    c.expect("{")?;
    let mut out = Vec::new();
    if c.eat("}") {
        return Ok(out);
    }
    loop {
        let (key, _) = c.name("an attribute name")?;
        c.expect("=")?;
        let (s, e) = c.balanced_value()?;
        out.push((key.to_string(), c.text[s..e].to_string()));
        if c.eat("}") {
            return Ok(out);
        }
        c.expect(",")?;
    }
}

pub(crate) fn frontend_attributes_to_text(attrs: &[(String, String)]) -> String {
    let parts: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", parts.join(","))
}

/// `{%a, %b}`: computation names.
pub(crate) fn parse_name_list<'a>(c: &mut Cursor<'a>) -> PResult<Vec<(&'a str, usize)>> {
    c.expect("{")?;
    let mut out = Vec::new();
    if c.eat("}") {
        return Ok(out);
    }
    loop {
        out.push(c.name("a computation name")?);
        if c.eat("}") {
            return Ok(out);
        }
        c.expect(",")?;
    }
}
