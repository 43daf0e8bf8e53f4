//! The assignment as the text of its dump.

use super::{align_to, in_arena, BufferAssignment, BufferKind};
use std::fmt::Write;

impl BufferAssignment {
    /// The text of `module_NNNN.NAME.buffer-assignment.txt`.
    /// The timeline position where the most bytes are live, and the buffers live there.
    pub(crate) fn peak_position(&self) -> (usize, Vec<usize>) {
        let end = self.timeline.len();
        let mut best = (0usize, -1i64);
        for t in 0..=end {
            let live: i64 = self
                .buffers
                .iter()
                .filter(|b| in_arena(b) && b.live_range.0 <= t && t <= b.live_range.1)
                .map(|b| align_to(b.size, self.alignment))
                .sum();
            if live > best.1 {
                best = (t, live);
            }
        }
        let live = (0..self.buffers.len())
            .filter(|&i| {
                let r = self.buffers[i].live_range;
                in_arena(&self.buffers[i]) && r.0 <= best.0 && best.0 <= r.1
            })
            .collect();
        (best.0, live)
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "buffers_total_bytes: {}", self.total_bytes);
        let _ = writeln!(s, "buffers_peak_bytes: {}", self.peak_bytes);
        let _ = writeln!(s, "buffers_lower_bound_bytes: {}", self.lower_bound_bytes);
        let _ = writeln!(
            s,
            "values_unshared_peak_bytes: {}",
            self.unshared_values_bytes
        );
        let _ = writeln!(s, "buffers: {}", self.buffers.len());
        let (at, live) = self.peak_position();
        let _ = writeln!(
            s,
            "most bytes live at position {at}: buffers {}",
            live.iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(s);
        for (i, b) in self.buffers.iter().enumerate() {
            let kind = match b.kind {
                BufferKind::Parameter => "parameter",
                BufferKind::Constant => "constant",
                BufferKind::Temporary => "temporary",
                BufferKind::Scratch => "scratch",
                BufferKind::Side => "side",
            };
            let _ = writeln!(
                s,
                "buffer {i}: size={} offset={} live=[{},{}] kind={kind} values: {}",
                b.size,
                b.offset,
                b.live_range.0,
                b.live_range.1,
                b.values.join(", ")
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "timeline:");
        for (p, t) in self.timeline.iter().enumerate() {
            let _ = writeln!(s, "{p:5} {t}");
        }
        s
    }
}
