//! Max and average pooling (1-D over a height of 1, and 2-D), and the global poolings.

use super::conv::padding;
use super::{dims_of, single, Ctx, Layer};
use crate::keras::error::KerasError;
use crate::keras::options::Options;
use tessel_compiler::trace::{Padding, Tensor};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    Max,
    Average,
}

pub(super) struct Pooling {
    n: usize,
    kind: Kind,
    pool: Vec<i64>,
    strides: Vec<i64>,
    padding: Padding,
}

impl Pooling {
    pub(super) fn new(o: &Options, n: usize, kind: Kind) -> Result<Pooling, KerasError> {
        o.channels_last()?;
        let pool = o.ints("pool_size", n, Some(2))?;
        // Keras: strides default to the pool size.
        let strides = match o.get("strides") {
            None => pool.clone(),
            Some(_) => o.ints("strides", n, None)?,
        };
        Ok(Pooling {
            n,
            kind,
            pool,
            strides,
            padding: padding(o)?,
        })
    }
}

fn pair(v: &[i64]) -> [i64; 2] {
    match v {
        [w] => [1, *w],
        [h, w] => [*h, *w],
        _ => [1, 1],
    }
}

impl Layer for Pooling {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let d = dims_of(x)?;
        if d.len() != self.n + 2 {
            return Err(format!(
                "needs an input of rank {} (batch first), got shape {d:?}",
                self.n + 2
            ));
        }
        let x4 = if self.n == 1 {
            x.reshape(&[d[0], 1, d[1], d[2]])
        } else {
            x.clone()
        };
        let (k, s) = (pair(&self.pool), pair(&self.strides));
        let y = match self.kind {
            Kind::Max => x4.max_pool(k, s, self.padding),
            Kind::Average => x4.avg_pool(k, s, self.padding),
        };
        if self.n == 1 {
            let o = dims_of(&y)?;
            return Ok(y.reshape(&[o[0], o[2], o[3]]));
        }
        Ok(y)
    }
}

pub(super) struct Global {
    n: usize,
    kind: Kind,
    keepdims: bool,
}

impl Global {
    pub(super) fn new(o: &Options, n: usize, kind: Kind) -> Result<Global, KerasError> {
        o.channels_last()?;
        Ok(Global {
            n,
            kind,
            keepdims: o.bool_or("keepdims", false)?,
        })
    }
}

impl Layer for Global {
    fn call(&self, _cx: &mut Ctx, inputs: &[Tensor]) -> Result<Tensor, String> {
        let x = single(inputs)?;
        let d = dims_of(x)?;
        if d.len() != self.n + 2 {
            return Err(format!(
                "needs an input of rank {} (batch first), got shape {d:?}",
                self.n + 2
            ));
        }
        let axes: Vec<i64> = (1..=self.n as i64).collect();
        Ok(match self.kind {
            Kind::Max => x.reduce_max(&axes, self.keepdims),
            Kind::Average => x.reduce_mean(&axes, self.keepdims),
        })
    }
}
