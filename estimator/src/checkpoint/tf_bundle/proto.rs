//! The two protos of TF's tensor bundle (`tensorflow/core/protobuf/tensor_bundle.proto`),
//! written as prost structs so no protoc is needed. Only the fields tessel reads and writes
//! are declared; prost skips the others.

use tessel_compiler::ir::ElementType;

/// The value of the index's entry under the empty key.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct BundleHeaderProto {
    #[prost(int32, tag = "1")]
    pub num_shards: i32,
    /// 0 = little endian, 1 = big endian.
    #[prost(int32, tag = "2")]
    pub endianness: i32,
    #[prost(message, optional, tag = "3")]
    pub version: Option<VersionDef>,
}

/// `VersionDef`: the producer's bundle version and the oldest reader it allows.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct VersionDef {
    #[prost(int32, tag = "1")]
    pub producer: i32,
    #[prost(int32, tag = "2")]
    pub min_consumer: i32,
    #[prost(int32, repeated, tag = "3")]
    pub bad_consumers: Vec<i32>,
}

/// Where one tensor's bytes are and what they are.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct BundleEntryProto {
    /// A `tensorflow.DataType` number.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
    #[prost(int32, tag = "3")]
    pub shard_id: i32,
    #[prost(int64, tag = "4")]
    pub offset: i64,
    #[prost(int64, tag = "5")]
    pub size: i64,
    /// Masked CRC32C of the tensor's bytes.
    #[prost(fixed32, tag = "6")]
    pub crc32c: u32,
    /// Non-empty for a partitioned variable's full entry; kept as raw bytes, only to refuse it.
    #[prost(bytes = "vec", repeated, tag = "7")]
    pub slices: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TensorShapeProto {
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<Dim>,
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Dim {
    #[prost(int64, tag = "1")]
    pub size: i64,
    #[prost(string, tag = "2")]
    pub name: String,
}

/// TF's `DataType` number of each tessel element type (`types.proto`).
pub(crate) fn dtype_of(ty: ElementType) -> i32 {
    match ty {
        ElementType::F32 => 1,
        ElementType::F64 => 2,
        ElementType::S32 => 3,
        ElementType::U8 => 4,
        ElementType::S16 => 5,
        ElementType::S8 => 6,
        ElementType::S64 => 9,
        ElementType::Pred => 10,
        ElementType::BF16 => 14,
        ElementType::U16 => 17,
        ElementType::F16 => 19,
        ElementType::U32 => 22,
        ElementType::U64 => 23,
    }
}

/// The tessel element type of a TF `DataType` number; `None` for the dtypes tessel has no
/// type for (strings, complex numbers, quantized types, ...).
pub(crate) fn element_type_of(dtype: i32) -> Option<ElementType> {
    ElementType::ALL
        .into_iter()
        .find(|&ty| dtype_of(ty) == dtype)
}

/// The name TF prints for a `DataType` number.
pub(crate) fn dtype_name(dtype: i32) -> String {
    let name = match dtype {
        1 => "float32",
        2 => "float64",
        3 => "int32",
        4 => "uint8",
        5 => "int16",
        6 => "int8",
        7 => "string",
        8 => "complex64",
        9 => "int64",
        10 => "bool",
        14 => "bfloat16",
        17 => "uint16",
        18 => "complex128",
        19 => "float16",
        22 => "uint32",
        23 => "uint64",
        _ => return format!("DataType {dtype}"),
    };
    name.to_string()
}
