//! A tf.data-style `Dataset` on the host (`docs/input.md`, "Datasets" to "How a batch reaches
//! infeed").
//!
//! A [`Dataset`] is a cheap, cloneable, `Send + Sync` handle on a graph of nodes (sources and
//! transformations). It knows its [`ElementSpec`] without reading data, and makes iterators
//! that report their position, so a checkpoint can record it and [`Dataset::iter_from`] can
//! resume exactly there.
//!
//! | module | holds |
//! | --- | --- |
//! | `node` | the `Node` trait every source and transformation implements, `Cardinality` |
//! | `iterator` | `DatasetIterator`: elements in order and the position |
//! | `error` | `DatasetError` |
//! | `slices`, `generator`, `interleave` | sources |
//! | `map`, `filter`, `shuffle`, `repeat`, `batch`, `cache`, `prefetch`, `take_skip` | transformations |
//! | `component_ops` | ops on a named component: `parse_example`, `decode_raw`, `cast`, `scale`, `reshape` |
//! | `rng`, `array_ops`, `spec_check` | SplitMix64, typed buffer copies, element checks |

pub(crate) mod array_ops;
mod batch;
mod cache;
mod component_ops;
pub mod error;
mod filter;
mod generator;
mod interleave;
mod iterator;
mod map;
pub mod node;
mod prefetch;
mod repeat;
pub mod rng;
mod shuffle;
mod slices;
pub(crate) mod spec_check;
mod take_skip;

pub use error::{DatasetError, STATIC_SHAPE_ADVICE};
pub use generator::RecordReader;
pub use iterator::DatasetIterator;
pub use node::{Cardinality, ElementIter, ElementResult};

use crate::input::{Element, ElementSpec};
pub use node::Node;
use std::sync::Arc;
use take_skip::Selection;
use tessel_compiler::ir::Array;

/// A dataset: a description of a stream of elements, iterated any number of times.
#[derive(Clone)]
pub struct Dataset {
    node: Arc<dyn Node>,
}

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("spec", self.element_spec())
            .field("cardinality", &self.cardinality())
            .finish()
    }
}

impl Dataset {
    /// A dataset from a custom source (say, one that can open at any position, so resuming
    /// does not read what comes before). Most sources are [`Self::from_generator`].
    pub(crate) fn from_node(node: impl Node + 'static) -> Dataset {
        Dataset {
            node: Arc::new(node),
        }
    }

    // ---- sources ----

    /// Element `i` holds row `i` (along dimension 0) of each named array.
    pub fn from_tensor_slices(columns: Vec<(String, Array)>) -> Result<Dataset, DatasetError> {
        Ok(Self::from_node(slices::Slices::new(columns)?))
    }

    /// A source whose elements come from `open`, called once per pass (each epoch, each
    /// resume). Its elements must match `spec`; one that does not is an error naming it.
    pub fn from_generator<F>(spec: ElementSpec, open: F) -> Dataset
    where
        F: Fn() -> Result<ElementIter, DatasetError> + Send + Sync + 'static,
    {
        Self::from_node(generator::Generator::new(spec, Box::new(open)))
    }

    /// A source of records (one file's): each element has one scalar string component
    /// `component` holding a record. `reader` opens the file for each pass; its errors reach
    /// the consumer as [`DatasetError::Source`] with `context` (the file name, say).
    pub fn from_records<E>(
        component: &str,
        context: impl Into<String>,
        reader: Box<RecordReader<E>>,
    ) -> Dataset
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Self::from_node(generator::records(component, context.into(), reader))
    }

    /// tf.data's `interleave` over `inputs` (say, one dataset per file): `cycle_length` open at
    /// once, `block_length` consecutive elements from each in turn, in a deterministic order.
    pub fn interleave(
        inputs: Vec<Dataset>,
        cycle_length: usize,
        block_length: usize,
    ) -> Result<Dataset, DatasetError> {
        Ok(Self::from_node(interleave::Interleave::new(
            inputs,
            cycle_length,
            block_length,
        )?))
    }

    // ---- transformations ----

    /// Applies `f` to every element on `num_parallel_calls` threads (0 or 1: on the caller's),
    /// keeping input order. `spec` gives the output spec from the input's (return it unchanged
    /// for a map that keeps shapes, or a fixed spec). Outputs are checked against it.
    pub fn map<S, F>(
        self,
        spec: S,
        num_parallel_calls: usize,
        f: F,
    ) -> Result<Dataset, DatasetError>
    where
        S: FnOnce(&ElementSpec) -> Result<ElementSpec, DatasetError>,
        F: Fn(Element) -> Result<Element, DatasetError> + Send + Sync + 'static,
    {
        let out = spec(self.element_spec())?;
        Ok(Self::from_node(map::Map::new(
            self,
            Arc::new(f),
            out,
            num_parallel_calls,
            "map",
        )))
    }

    /// Keeps the elements for which `predicate` is true.
    pub fn filter<P>(self, predicate: P) -> Dataset
    where
        P: Fn(&Element) -> Result<bool, DatasetError> + Send + Sync + 'static,
    {
        Self::from_node(filter::Filter::new(self, Arc::new(predicate)))
    }

    /// Shuffles with a buffer of `buffer_size` elements, reshuffled each epoch and the same for
    /// the same seed (the algorithm is in `shuffle.rs` and `docs/input.md`).
    pub fn shuffle(self, buffer_size: usize, seed: u64) -> Result<Dataset, DatasetError> {
        Ok(Self::from_node(shuffle::Shuffle::new(
            self,
            buffer_size,
            seed,
        )?))
    }

    /// The dataset `count` times over, or forever with `None` (`repeat()`).
    pub fn repeat(self, count: Option<u64>) -> Dataset {
        Self::from_node(repeat::Repeat::new(self, count))
    }

    /// Stacks `size` consecutive elements. Without `drop_remainder` the last batch may be
    /// short, so the batch dimension is unknown (`None`) in the spec.
    pub fn batch(self, size: u64, drop_remainder: bool) -> Result<Dataset, DatasetError> {
        Ok(Self::from_node(batch::Batch::new(
            self,
            size,
            drop_remainder,
        )?))
    }

    /// Batches of `size`, the last padded to `size` with zeros, plus a component `mask`
    /// (f32 `[size]`) that is 1 for real examples and 0 for padding.
    pub fn padded_batch_with_mask(self, size: u64, mask: &str) -> Result<Dataset, DatasetError> {
        Ok(Self::from_node(batch::Batch::padded_with_mask(
            self, size, mask,
        )?))
    }

    /// `map(f)` then `batch(size, drop_remainder)`.
    pub fn map_and_batch<S, F>(
        self,
        spec: S,
        num_parallel_calls: usize,
        f: F,
        size: u64,
        drop_remainder: bool,
    ) -> Result<Dataset, DatasetError>
    where
        S: FnOnce(&ElementSpec) -> Result<ElementSpec, DatasetError>,
        F: Fn(Element) -> Result<Element, DatasetError> + Send + Sync + 'static,
    {
        self.map(spec, num_parallel_calls, f)?
            .batch(size, drop_remainder)
    }

    /// Keeps the first complete pass in memory; later passes do not read the input.
    pub fn cache(self) -> Dataset {
        Self::from_node(cache::Cache::new(self))
    }

    /// Produces up to `depth` elements ahead on a background thread.
    pub fn prefetch(self, depth: usize) -> Dataset {
        Self::from_node(prefetch::Prefetch::new(self, depth))
    }

    /// The first `n` elements.
    pub fn take(self, n: u64) -> Dataset {
        Self::from_node(take_skip::Select::new(self, Selection::Take(n)))
    }

    /// All but the first `n` elements.
    pub fn skip(self, n: u64) -> Dataset {
        Self::from_node(take_skip::Select::new(self, Selection::Skip(n)))
    }

    /// Every `num_shards`-th element starting at `index` (one input host's share).
    pub fn shard(self, num_shards: u64, index: u64) -> Result<Dataset, DatasetError> {
        Ok(Self::from_node(take_skip::Select::shard(
            self, num_shards, index,
        )?))
    }

    // ---- reading ----

    /// What every element looks like (no data is read).
    pub fn element_spec(&self) -> &ElementSpec {
        self.node.spec()
    }

    /// How many elements there are, when known without reading data.
    pub fn cardinality(&self) -> Cardinality {
        self.node.cardinality()
    }

    /// An iterator from the first element.
    pub fn iter(&self) -> DatasetIterator {
        self.iter_from(0)
    }

    /// An iterator from element `position` on: exactly what [`Self::iter`] gives after its
    /// first `position` elements (shuffles and repeats included).
    pub fn iter_from(&self, position: u64) -> DatasetIterator {
        DatasetIterator::new(self.node.open(0, position), position)
    }
}
