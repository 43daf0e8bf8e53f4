//! Sources from closures: `from_generator` (a closure that opens an iterator of elements, for
//! any source: TFRecord files, IDX files, synthetic data) and `from_records` (a per-file record
//! reader giving byte strings, each becoming an element with one scalar string component).

use super::error::{panic_message, DatasetError};
use super::node::{failed, fast_forward, Cardinality, ElementIter, Node};
use super::spec_check::check_element;
use crate::input::{Element, ElementSpec, Value, ValueSpec};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// Opens a fresh pass over a generator's elements.
pub(crate) type OpenFn = dyn Fn() -> Result<ElementIter, DatasetError> + Send + Sync;

pub(crate) struct Generator {
    spec: ElementSpec,
    open: Box<OpenFn>,
}

impl Generator {
    pub(super) fn new(spec: ElementSpec, open: Box<OpenFn>) -> Self {
        Generator { spec, open }
    }
}

impl Node for Generator {
    fn spec(&self) -> &ElementSpec {
        &self.spec
    }

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    fn open(&self, _key: u64, start: u64) -> ElementIter {
        let iter = match (self.open)() {
            Ok(iter) => iter,
            Err(e) => return failed(e),
        };
        let spec = self.spec.clone();
        let mut iter = iter;
        let mut index = 0u64;
        let mut done = false;
        // Elements are checked against the declared spec: a generator that breaks its promise
        // fails here, naming the element, not later in a batch. Its code panicking is an
        // error too, and the end of this pass.
        let checked = std::iter::from_fn(move || {
            if done {
                return None;
            }
            let i = index;
            index += 1;
            let r = match catch_unwind(AssertUnwindSafe(|| iter.next())) {
                // A `DatasetError::msg` from the generator gets its op and index here.
                Ok(r) => r?.map_err(|e| e.placed("from_generator", i, None)),
                Err(p) => {
                    done = true;
                    return Some(Err(DatasetError::Panicked {
                        op: "from_generator",
                        index: i,
                        message: panic_message(p.as_ref()),
                    }));
                }
            };
            Some(
                r.and_then(|e| match check_element(&spec, &e, "from_generator", i) {
                    Ok(()) => Ok(e),
                    Err(err) => Err(err.placed("from_generator", i, e.origin.as_ref())),
                }),
            )
        });
        fast_forward(Box::new(checked), start)
    }
}

/// A per-file record reader as the TFRecord reader provides it: each call opens the file again.
pub type RecordReader<E> =
    dyn FnMut() -> Result<Box<dyn Iterator<Item = Result<Vec<u8>, E>> + Send>, E> + Send;

/// Wraps a record reader into a generator of one scalar string component named `component`;
/// its errors pass through as [`DatasetError::Source`] with `context` (say, the file name).
pub(super) fn records<E>(
    component: &str,
    context: String,
    reader: Box<RecordReader<E>>,
) -> Generator
where
    E: std::error::Error + Send + Sync + 'static,
{
    let spec = ElementSpec {
        components: vec![(component.to_string(), ValueSpec::Bytes { dims: vec![] })],
    };
    let reader = Mutex::new(reader);
    let open = move || -> Result<ElementIter, DatasetError> {
        let mut reader = reader.lock().unwrap_or_else(|p| p.into_inner());
        let ctx = context.clone();
        let iter = (reader)().map_err(|e| DatasetError::source(ctx.clone(), e))?;
        Ok(Box::new(iter.map(move |r| {
            r.map(|bytes| {
                Element::new(vec![Value::Bytes {
                    dims: vec![],
                    items: vec![bytes],
                }])
            })
            .map_err(|e| DatasetError::source(ctx.clone(), e))
        })))
    };
    Generator::new(spec, Box::new(open))
}
