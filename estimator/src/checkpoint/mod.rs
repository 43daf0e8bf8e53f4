//! Checkpoints in a model_dir, laid out as TF's `Saver` lays them out.
//!
//! | file | holds |
//! | --- | --- |
//! | `model.ckpt-N.safetensors` | every variable by its TF name (model variables and optimizer slots), the global step (`global_step`, s64) and the input pipeline's position (`input_pipeline/...`) |
//! | `model.ckpt-N.index`, `model.ckpt-N.data-00000-of-00001` | the same tensors in TF's tensor bundle format, instead of or beside the safetensors file (`RunConfig::checkpoint_format`); TF restores them |
//! | `checkpoint` | TF's `CheckpointState` in protobuf text format: `model_checkpoint_path` and `all_model_checkpoint_paths` (prefixes, as TF writes them) |
//!
//! [`tf_bundle`] reads and writes TensorFlow's own checkpoints natively (restoring takes a
//! prefix's safetensors file first, else its `.index`), and [`WarmStart`] gives a new
//! model_dir's variables their first values from either kind.
//!
//! Both are written durably (a temporary file, synced, renamed, then the directory synced),
//! the checkpoint before the state file, so a crash or a power loss at any moment leaves the
//! previous state file naming complete checkpoints. Every tensor carries a CRC32C, checked
//! when it is read. Old checkpoints beyond `keep_checkpoint_max` are deleted after the new
//! state file is in place. [`ModelDirLock`] keeps a second trainer out of a model_dir.

mod lock;
mod run_seed;
mod saver;
mod state_file;
pub mod tf_bundle;
mod warm_start;

pub use lock::{LockError, ModelDirLock};
pub(crate) use run_seed::run_seed;
pub use saver::{read_checkpoint, Checkpoint, CheckpointError, Restored, Saver};
pub use state_file::CheckpointState;
pub use tf_bundle::{TfBundle, TfBundleError};
pub use warm_start::{WarmStart, WarmStartError, WarmValues};
