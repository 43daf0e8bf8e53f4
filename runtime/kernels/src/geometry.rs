//! The geometry of a 2-D convolution as the specialized routines see it: NHWC images, stride
//! 1, no dilation or reversal, one group, any (also negative) padding.

/// A forward 2-D convolution `[batch, height, width, channels] * window -> out_channels`.
/// The weight-gradient routines take the geometry of the forward convolution whose kernel
/// gradient they compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dGeometry {
    pub batch: usize,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    /// Kernel rows and columns.
    pub window: [usize; 2],
    pub out_channels: usize,
    /// `(low, high)` padding of the rows and of the columns; negative crops.
    pub padding: [(isize, isize); 2],
}

impl Conv2dGeometry {
    /// Output rows and columns, if both are positive.
    pub fn output_size(&self) -> Option<[usize; 2]> {
        Some([
            window_output(self.height, self.padding[0], self.window[0])?,
            window_output(self.width, self.padding[1], self.window[1])?,
        ])
    }

    /// No dimension is zero and the output is not empty.
    pub(crate) fn is_nonempty(&self) -> bool {
        let dims = [
            self.batch,
            self.height,
            self.width,
            self.channels,
            self.out_channels,
        ];
        dims.iter().chain(&self.window).all(|&d| d > 0) && self.output_size().is_some()
    }
}

/// The output size of a stride-1 window of `k` over `n` padded by `pad`, if positive.
pub fn window_output(n: usize, pad: (isize, isize), k: usize) -> Option<usize> {
    let out = n as isize + pad.0 + pad.1 - k as isize + 1;
    (out > 0).then_some(out as usize)
}
