# Writes sm_all_to_all_r4.{hlo,inputs.safetensors,outputs.safetensors}: jax.lax.all_to_all in a
# jax.shard_map over 4 CPU devices (JAX 0.10.2), the HLO as jax.jit(f).lower(...).as_text(dialect="hlo")
# and what JAX computed. Usage: python sm_all_to_all_r4.py tests/mpi/sm_all_to_all_r4
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P
import json, struct
def save_file(t, path):
    hdr = {}; off = 0; blobs = []
    for k, v in t.items():
        b = np.ascontiguousarray(v).tobytes()
        hdr[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

mesh = Mesh(np.array(jax.devices()), ("r",))

def local(x, y):
    # x: [8, 6] per device; rows split in 4 chunks of 2, concatenated along rows.
    a = lax.all_to_all(x, "r", split_axis=0, concat_axis=0, tiled=True)
    # Columns split, rows concatenated: XLA's all-to-all on dimension 1, then a reshape and
    # transpose.
    b = lax.all_to_all(jnp.tanh(y), "r", split_axis=1, concat_axis=0, tiled=True)
    return a * 2.0 + 1.0, b

f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P("r"), P("r")), out_specs=(P("r"), P("r"))))
rng = np.random.default_rng(0)
x = rng.standard_normal((32, 6)).astype(np.float32)
y = rng.standard_normal((8, 8)).astype(np.float32)
text = f.lower(x, y).as_text(dialect="hlo")
out = f(x, y)
name = sys.argv[1]  # e.g. tests/mpi/sm_all_to_all_r4
open(name + ".hlo", "w").write(text)
save_file({"0": x, "1": y}, name + ".inputs.safetensors")
save_file({"0": np.asarray(out[0]), "1": np.asarray(out[1])}, name + ".outputs.safetensors")
