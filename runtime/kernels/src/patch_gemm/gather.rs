//! Gathering one row of a convolution's patch matrix: a sequence of contiguous runs copied
//! from the input (or zeros where the window reads padding or a base-dilation hole).
//!
//! A row visits a grid of spatial positions: per spatial dimension `d`, coordinate
//! `fixed[d] + list_d[j]`, the lists taken as a row-major product. For im2col rows (one output
//! point) the lists are the window offsets; for the weight-gradient form (one kernel position)
//! they are the output positions times the stride. Each grid point contributes one run of
//! `run` floats. When the innermost list steps by one input pixel and each pixel is exactly
//! one run, the whole innermost line is one clipped copy (a 5-wide window row of 32 channels
//! is one 160-float copy) with zeros on either side for the padding, instead of five checked
//! copies.

/// Most spatial dimensions a convolution may have here.
pub(crate) const MAX_SPATIAL: usize = 8;

/// The spatial grid a patch row visits, and how coordinates map to the input.
#[derive(Clone, Debug)]
pub(crate) struct PatchGrid {
    in_spatial: Vec<usize>,
    base_dilation: Vec<i64>,
    /// Per spatial dimension, the offsets added to the row's fixed coordinate.
    lists: Vec<Vec<i64>>,
    /// The innermost list's first offset when it steps by one (see `unit_inner`).
    unit_start: Option<i64>,
}

impl PatchGrid {
    /// At most [`MAX_SPATIAL`] spatial dimensions (the caller checks).
    pub(crate) fn new(
        in_spatial: Vec<usize>,
        base_dilation: Vec<i64>,
        lists: Vec<Vec<i64>>,
    ) -> Self {
        let mut g = PatchGrid {
            in_spatial,
            base_dilation,
            lists,
            unit_start: None,
        };
        g.unit_start = g.unit_inner();
        g
    }

    /// The innermost list as `start + j` (unit steps, no dilation), if it is one.
    fn unit_inner(&self) -> Option<i64> {
        let l = self.lists.last()?;
        let unit = *self.base_dilation.last()? == 1 && l.windows(2).all(|w| w[1] == w[0] + 1);
        (unit && !l.is_empty()).then(|| l[0])
    }

    /// The input index along dimension `d` of coordinate `p`, or `None` for padding / holes.
    #[inline]
    fn coord(&self, d: usize, p: i64) -> Option<usize> {
        let ld = self.base_dilation[d];
        let p = if ld == 1 {
            p
        } else if p < 0 || p % ld != 0 {
            return None;
        } else {
            p / ld
        };
        (p >= 0 && p < self.in_spatial[d] as i64).then_some(p as usize)
    }

    /// Writes the row for fixed coordinates `fixed`: `points() * run` floats at `dst`, run `j`
    /// taken from `img + pixel * pixel_stride` or zero.
    ///
    /// # Safety
    /// `img` must address every pixel of the input with `pixel_stride` floats per pixel and
    /// `run` readable floats at each; `dst` must hold `points() * run` floats.
    pub(crate) unsafe fn gather_row(
        &self,
        img: *const f32,
        pixel_stride: usize,
        run: usize,
        fixed: &[i64],
        dst: *mut f32,
    ) {
        let nsp = self.in_spatial.len();
        if nsp == 0 {
            copy_floats(img, dst, run);
            return;
        }
        let inner_len = self.lists[nsp - 1].len();
        let line = inner_len * run;
        let outer: usize = self.lists[..nsp - 1].iter().map(|l| l.len()).product();
        let unit = self.unit_start.filter(|_| pixel_stride == run);
        let last_size = self.in_spatial[nsp - 1] as i64;
        if let (2, Some(start)) = (nsp, unit) {
            return self.gather_row_2d(img, run, fixed, start, dst);
        }
        // No heap allocation per row: this runs for every patch row.
        let mut idx = [0usize; MAX_SPATIAL];
        let idx = &mut idx[..nsp - 1];
        for o in 0..outer {
            let out_line = dst.add(o * line);
            // Pixel index of the outer coordinates, or None when they are off the input.
            let mut base = Some(0usize);
            for (d, &j) in idx.iter().enumerate() {
                base = match (base, self.coord(d, fixed[d] + self.lists[d][j])) {
                    (Some(b), Some(c)) => Some(b * self.in_spatial[d] + c),
                    _ => None,
                };
            }
            match (base, unit) {
                (None, _) => zero_floats(out_line, line),
                (Some(b), Some(start)) => {
                    // Coordinates c0 + j, j in 0..inner_len; valid where 0 <= c0 + j < size.
                    let c0 = fixed[nsp - 1] + start;
                    let lo = (-c0).clamp(0, inner_len as i64) as usize;
                    let hi = (last_size - c0).clamp(lo as i64, inner_len as i64) as usize;
                    zero_floats(out_line, lo * run);
                    if hi > lo {
                        let pixel = b * last_size as usize + (c0 + lo as i64) as usize;
                        copy_floats(
                            img.add(pixel * pixel_stride),
                            out_line.add(lo * run),
                            (hi - lo) * run,
                        );
                    }
                    zero_floats(out_line.add(hi * run), (inner_len - hi) * run);
                }
                (Some(b), None) => {
                    let list = &self.lists[nsp - 1];
                    for (j, &off) in list.iter().enumerate() {
                        let at = out_line.add(j * run);
                        match self.coord(nsp - 1, fixed[nsp - 1] + off) {
                            Some(c) => copy_floats(
                                img.add((b * last_size as usize + c) * pixel_stride),
                                at,
                                run,
                            ),
                            None => zero_floats(at, run),
                        }
                    }
                }
            }
            // Advance the odometer over the outer dimensions.
            for d in (0..nsp - 1).rev() {
                idx[d] += 1;
                if idx[d] < self.lists[d].len() {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

impl PatchGrid {
    /// `gather_row` for two spatial dimensions with a unit-step inner list and one run per
    /// pixel (the usual NHWC image): the clipping of the inner line is the same for every
    /// outer position, so it is worked out once per row.
    #[inline]
    unsafe fn gather_row_2d(
        &self,
        img: *const f32,
        run: usize,
        fixed: &[i64],
        start: i64,
        dst: *mut f32,
    ) {
        let inner_len = self.lists[1].len();
        let line = inner_len * run;
        let width = self.in_spatial[1] as i64;
        let c0 = fixed[1] + start;
        let lo = (-c0).clamp(0, inner_len as i64) as usize;
        let hi = (width - c0).clamp(lo as i64, inner_len as i64) as usize;
        let (head, body, tail) = (lo * run, (hi - lo) * run, (inner_len - hi) * run);
        let first = (c0 + lo as i64) as usize;
        for (o, &off) in self.lists[0].iter().enumerate() {
            let out_line = dst.add(o * line);
            match self.coord(0, fixed[0] + off) {
                Some(y) if body > 0 => {
                    zero_floats(out_line, head);
                    copy_floats(
                        img.add((y * width as usize + first) * run),
                        out_line.add(head),
                        body,
                    );
                    zero_floats(out_line.add(head + body), tail);
                }
                _ => zero_floats(out_line, line),
            }
        }
    }
}

/// Copies `len` floats; short copies inline as a few fixed-size moves (a library call per
/// few floats costs more than the copy).
#[inline]
unsafe fn copy_floats(src: *const f32, dst: *mut f32, len: usize) {
    use std::ptr::copy_nonoverlapping as copy;
    match len {
        0 => {}
        1 => *dst = *src,
        2 => copy(src, dst, 2),
        3 => {
            copy(src, dst, 2);
            *dst.add(2) = *src.add(2);
        }
        4 => copy(src, dst, 4),
        5..=7 => {
            // Two overlapping 4-float moves cover 5 to 7 floats.
            copy(src, dst, 4);
            copy(src.add(len - 4), dst.add(len - 4), 4);
        }
        8 => copy(src, dst, 8),
        _ => copy(src, dst, len),
    }
}

#[inline]
unsafe fn zero_floats(dst: *mut f32, len: usize) {
    const Z: [f32; 8] = [0.0; 8];
    if len <= 8 {
        copy_floats(Z.as_ptr(), dst, len);
    } else {
        std::ptr::write_bytes(dst, 0, len);
    }
}
