//! TF's `compression_type` for TFRecord files: the whole file is one GZIP or ZLIB stream of
//! framed records (not each record compressed on its own).

use crate::input::InputError;

/// How a TFRecord file is compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zlib,
}

impl Compression {
    /// From TF's names: `""` (also `"NONE"`), `"GZIP"`, `"ZLIB"`.
    pub fn from_tf_name(name: &str) -> Result<Compression, InputError> {
        match name {
            "" | "NONE" => Ok(Compression::None),
            "GZIP" => Ok(Compression::Gzip),
            "ZLIB" => Ok(Compression::Zlib),
            other => Err(InputError::UnknownCompression(other.to_string())),
        }
    }

    /// TF's name for this compression.
    pub fn tf_name(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => "GZIP",
            Compression::Zlib => "ZLIB",
        }
    }
}
