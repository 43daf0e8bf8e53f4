//! `tessel data`: TFRecord files of `tf.train.Example` on the command line.
//! - `convert-mnist IDX_DIR OUT_DIR`: MNIST IDX files to `train.tfrecords` and `test.tfrecords`
//!   with the features of TF's `convert_to_records.py`;
//! - `inspect FILE... [--limit N]`: `records: N`, then the first N examples as text.
//!
//! The logic is in the library (`tessel_estimator::input`); this file only prints.

use super::fail;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;
use tessel_estimator::input::example::{text::describe, Example};
use tessel_estimator::input::mnist::convert_mnist;
use tessel_estimator::input::tfrecord::{Compression, ReaderOptions, RecordFiles};

#[derive(Subcommand)]
pub enum DataCommand {
    /// Convert MNIST's IDX files (plain or .gz) into train.tfrecords and test.tfrecords.
    ConvertMnist { idx_dir: PathBuf, out_dir: PathBuf },
    /// Count the records of TFRecord files and print the first examples.
    Inspect {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// How many examples to print.
        #[arg(long, default_value_t = 1)]
        limit: usize,
        /// TF's compression_type: "", GZIP or ZLIB.
        #[arg(long, default_value = "")]
        compression: String,
    },
}

pub fn run(command: &DataCommand) -> ExitCode {
    match command {
        DataCommand::ConvertMnist { idx_dir, out_dir } => match convert_mnist(idx_dir, out_dir) {
            Ok(done) => {
                for (path, records) in done.files {
                    println!("wrote {} ({records} records)", path.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        DataCommand::Inspect {
            files,
            limit,
            compression,
        } => inspect(files, *limit, compression),
    }
}

fn inspect(files: &[PathBuf], limit: usize, compression: &str) -> ExitCode {
    let compression = match Compression::from_tf_name(compression) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let options = ReaderOptions {
        compression,
        ..Default::default()
    };
    let mut records = RecordFiles::new(files, options);
    let mut shown = Vec::new();
    let mut count = 0u64;
    let mut buf = Vec::new();
    loop {
        match records.read_into(&mut buf) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return fail(e),
        }
        count += 1;
        if shown.len() < limit {
            let record = records
                .current()
                .and_then(|r| r.last_record())
                .expect("a record was just read from a file");
            match Example::from_bytes(&buf) {
                Ok(example) => shown.push(format!(
                    "example {} ({record}):\n{}",
                    shown.len(),
                    describe(&example)
                )),
                Err(e) => return fail(format!("{record}: not a tf.train.Example: {e}")),
            }
        }
    }
    println!("records: {count}");
    for s in shown {
        print!("{s}");
    }
    ExitCode::SUCCESS
}
