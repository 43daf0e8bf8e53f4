//! Parsing `tf.train.Example` records into elements, as `tf.io.parse_single_example` and
//! `tf.io.decode_raw` do.
//!
//! | module | holds |
//! | --- | --- |
//! | `spec` | `FeatureSpec` (`FixedLenFeature`, `VarLenFeature`), `ParseSpec` and its `ElementSpec` |
//! | `single_example` | `parse_single_example` |
//! | `decode_raw` | `decode_raw` of bytes into u8, f32 or s32 |

pub mod decode_raw;
pub(crate) mod single_example;
pub mod spec;

pub use decode_raw::{decode_raw, RawType};
pub use single_example::{parse_single_example, parse_single_example_at};
pub use spec::{FeatureDType, FeatureDefault, FeatureSpec, ParseSpec};
