//! The input pipeline: datasets, parsing, TFRecords, IDX files, the MNIST input_fn.

#[path = "../support/mod.rs"]
mod support;

mod dataset;
mod file_datasets;
mod mnist_input;
mod parse;
mod records;
