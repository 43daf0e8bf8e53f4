"""TensorFlow reads a tessel model_dir written with `--checkpoint-format both`.

usage: python check_tf_reads.py MODEL_DIR

Checks that `tf.train.latest_checkpoint(MODEL_DIR)` finds the latest checkpoint through
tessel's `checkpoint` state file, that `tf.train.load_checkpoint` reads every tensor of it, and
that every tensor TF reads is bitwise the tensor tessel wrote in `PREFIX.safetensors` (same
names, dtypes, shapes and bytes). Needs TensorFlow (2.15 was used); the Rust tests do not.
"""
import json
import os
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

SAFETENSORS_DTYPES = {
    "BOOL": np.bool_, "I8": np.int8, "U8": np.uint8, "I16": np.int16, "U16": np.uint16,
    "I32": np.int32, "U32": np.uint32, "I64": np.int64, "U64": np.uint64,
    "F16": np.float16, "F32": np.float32, "F64": np.float64,
}


def read_safetensors(path):
    """name -> (numpy dtype name, shape, raw little-endian bytes), without the safetensors package."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = info["dtype"]
        out[name] = (dtype, tuple(info["shape"]), data[start:end])
    return out


def main(model_dir):
    prefix = tf.train.latest_checkpoint(model_dir)
    if prefix is None:
        sys.exit(f"FAIL: tf.train.latest_checkpoint({model_dir!r}) found no checkpoint")
    reader = tf.train.load_checkpoint(model_dir)
    dtypes = reader.get_variable_to_dtype_map()
    shapes = reader.get_variable_to_shape_map()
    tessel = read_safetensors(prefix + ".safetensors")
    if set(dtypes) != set(tessel):
        sys.exit(f"FAIL: names differ: TF only {sorted(set(dtypes) - set(tessel))}, "
                 f"tessel only {sorted(set(tessel) - set(dtypes))}")
    total_bytes = 0
    for name in sorted(dtypes):
        value = reader.get_tensor(name)
        dtype, shape, raw = tessel[name]
        if dtype == "BF16":
            same_dtype = dtypes[name] == tf.bfloat16
        else:
            same_dtype = np.dtype(SAFETENSORS_DTYPES[dtype]) == dtypes[name].as_numpy_dtype
        if not same_dtype:
            sys.exit(f"FAIL: {name}: TF reads {dtypes[name].name}, tessel wrote {dtype}")
        if tuple(shapes[name]) != shape:
            sys.exit(f"FAIL: {name}: TF reads shape {shapes[name]}, tessel wrote {list(shape)}")
        got = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()
        if got != raw:
            sys.exit(f"FAIL: {name}: the bytes TF reads differ from tessel's")
        total_bytes += len(raw)
    step = reader.get_tensor("global_step")
    print(f"ok: {prefix}: {len(dtypes)} tensors, {total_bytes} bytes, bitwise equal to "
          f"tessel's safetensors; global_step = {step} ({dtypes['global_step'].name})")


if __name__ == "__main__":
    main(sys.argv[1])
