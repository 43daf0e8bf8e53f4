//! Window arithmetic shared by reduce-window, select-and-scatter and convolution.

use super::util::{err, Result};
use crate::ir::{Window, WindowDim, UNKNOWN_DIM};

/// `size=2x2 stride=2x2 pad=0_0x1_1 ...`, for messages.
pub(crate) fn window_text(w: &Window) -> String {
    let join =
        |f: &dyn Fn(&WindowDim) -> String| w.dims.iter().map(f).collect::<Vec<_>>().join("x");
    let mut s = format!("size={}", join(&|d| d.size.to_string()));
    if w.dims.iter().any(|d| d.stride != 1) {
        s += &format!(" stride={}", join(&|d| d.stride.to_string()));
    }
    if w.dims.iter().any(|d| d.pad_low != 0 || d.pad_high != 0) {
        s += &format!(
            " pad={}",
            join(&|d| format!("{}_{}", d.pad_low, d.pad_high))
        );
    }
    if w.dims.iter().any(|d| d.base_dilation != 1) {
        s += &format!(" lhs_dilate={}", join(&|d| d.base_dilation.to_string()));
    }
    if w.dims.iter().any(|d| d.window_dilation != 1) {
        s += &format!(" rhs_dilate={}", join(&|d| d.window_dilation.to_string()));
    }
    format!("window={{{s}}}")
}

/// Checks the window's own attributes (positive sizes, strides and dilations).
pub(crate) fn check_window(name: &str, w: &Window) -> Result<()> {
    for (i, d) in w.dims.iter().enumerate() {
        let bad = if d.size <= 0 {
            Some("size must be positive")
        } else if d.stride <= 0 {
            Some("stride must be positive")
        } else if d.base_dilation < 1 {
            Some("lhs_dilate must be at least 1")
        } else if d.window_dilation < 1 {
            Some("rhs_dilate must be at least 1")
        } else {
            None
        };
        if let Some(why) = bad {
            return err(format!("{name}: {} dimension {i}: {why}", window_text(w)));
        }
    }
    Ok(())
}

/// The number of window positions along one dimension of size `base` (XLA's rule: dilate the
/// base, pad it, then count the strided positions where the dilated window fits).
/// A dimension of unknown size stays unknown; a dynamic one stays dynamic.
pub(crate) fn window_output_dim(
    name: &str,
    base: (i64, bool),
    d: &WindowDim,
    i: usize,
) -> Result<(i64, bool)> {
    if base.0 == UNKNOWN_DIM {
        return Ok((UNKNOWN_DIM, true));
    }
    let dilated_base = if base.0 == 0 {
        0
    } else {
        (base.0 - 1) * d.base_dilation + 1
    };
    let padded = dilated_base + d.pad_low + d.pad_high;
    if padded < 0 {
        return err(format!(
            "{name}: padding {}_{} of window dimension {i} leaves a negative size for an \
             input dimension of size {}",
            d.pad_low, d.pad_high, base.0
        ));
    }
    let dilated_window = (d.size - 1) * d.window_dilation + 1;
    let out = if dilated_window > padded {
        0
    } else {
        (padded - dilated_window) / d.stride + 1
    };
    Ok((out, base.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wd(size: i64, stride: i64, pad: i64) -> WindowDim {
        WindowDim {
            stride,
            pad_low: pad,
            pad_high: pad,
            ..WindowDim::new(size)
        }
    }

    #[test]
    fn output_sizes() {
        assert_eq!(
            window_output_dim("t", (28, false), &wd(2, 2, 0), 0).unwrap(),
            (14, false)
        );
        assert_eq!(
            window_output_dim("t", (28, false), &wd(5, 1, 2), 0).unwrap(),
            (28, false)
        );
        assert_eq!(
            window_output_dim("t", (3, false), &wd(5, 1, 0), 0).unwrap(),
            (0, false)
        );
        let mut dil = wd(3, 1, 0);
        dil.window_dilation = 2;
        assert_eq!(
            window_output_dim("t", (10, true), &dil, 0).unwrap(),
            (6, true)
        );
        let mut base = wd(3, 1, 0);
        base.base_dilation = 2;
        assert_eq!(
            window_output_dim("t", (4, false), &base, 0).unwrap(),
            (5, false)
        );
        assert!(window_output_dim("t", (2, false), &wd(1, 1, -2), 0).is_err());
    }

    #[test]
    fn window_text_and_checks() {
        let w = Window {
            dims: vec![wd(2, 2, 0), wd(3, 1, 1)],
        };
        assert_eq!(window_text(&w), "window={size=2x3 stride=2x1 pad=0_0x1_1}");
        assert!(check_window("t", &w).is_ok());
        let bad = Window {
            dims: vec![wd(2, 0, 0)],
        };
        let e = check_window("reduce-window", &bad).unwrap_err();
        assert!(e.message.contains("stride must be positive"), "{e}");
    }
}
