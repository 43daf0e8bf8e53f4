"""An estimator export runs unchanged in XLA, with the outputs `tessel predict` gives.

Run in the JAX environment (/tmp/jax, see ../shared/peers/README.md); CI does not need it.

    python tests/tf/check_export_xla.py EXPORT_DIR [--tessel target/release/tessel]
        [--idx estimator/data/mnist/t10k-images-idx3-ubyte.gz] [--batches 3]
        [--predictions PRED.safetensors]

For each of `--batches` batches of the export's batch size it builds the inputs (MNIST test
images normalized as in training, `x / 255 - 0.5`, when the export's input is `image`
f32[B, 784]; otherwise uniform values in [-0.5, 0.5)), then:
  - XLA: parses model.hlo with XLA's HLO-text parser (`hlo_module_from_text`), converts it to
    StableHLO, compiles it on XLA:CPU, runs it with the parameters of signature.json (variables
    from variables.safetensors);
  - tessel: runs `tessel predict EXPORT_DIR --inputs X --outputs Y` on the same inputs;
and compares every output (integers exactly, floats by max abs difference). With
`--predictions` (the example's `--mode predict --predictions-out` file) it also compares the
export's outputs with the estimator's `predict()` on the same rows. Exit code 1 on a mismatch.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import jax
import jax.extend  # noqa: F401  (jax.extend.backend)
import jaxlib._jax as _jax
from jax._src.lib import xla_client
from safetensors.numpy import load_file, save_file

DTYPES = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "s64": np.int64,
          "u8": np.uint8, "u32": np.uint32, "pred": np.bool_}
FLOAT_TOL = 1e-5


def mnist_images(path, start, count):
    with gzip.open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[4:8], "big")
    images = np.frombuffer(data, np.uint8, offset=16).reshape(n, 784)
    rows = images[start:start + count].astype(np.float32) * np.float32(1.0 / 255) - np.float32(0.5)
    return rows, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("--tessel", default="target/release/tessel")
    ap.add_argument("--idx", default="estimator/data/mnist/t10k-images-idx3-ubyte.gz")
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--predictions")
    a = ap.parse_args()

    sig = json.load(open(os.path.join(a.export_dir, "signature.json")))
    variables = load_file(os.path.join(a.export_dir, "variables.safetensors"))
    text = open(os.path.join(a.export_dir, "model.hlo")).read()
    module = xla_client.hlo.hlo_module_from_text(text)
    stablehlo = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    backend = jax.extend.backend.get_backend("cpu")
    device = backend.local_devices()[0]
    exe = backend.compile_and_load(stablehlo, _jax.DeviceList((device,)), _jax.CompileOptions())
    print(f"XLA compiled model.hlo ({len(text)} bytes of HLO text, jax {jax.__version__})")

    batch = sig["batch_size"]
    inputs = [p for p in sig["parameters"] if p["kind"] == "input"]
    predicted = load_file(a.predictions) if a.predictions else None
    worst = {}
    ok = True
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for b in range(a.batches):
            feed = {}
            for p in inputs:
                if p["name"] == "image" and p["shape"] == [batch, 784] and os.path.exists(a.idx):
                    feed["image"], _ = mnist_images(a.idx, b * batch, batch)
                else:
                    feed[p["name"]] = rng.uniform(-0.5, 0.5, p["shape"]).astype(DTYPES[p["dtype"]])
            args = []
            for p in sig["parameters"]:
                v = variables[p["name"]] if p["kind"] == "variable" else feed[p["name"]]
                assert list(v.shape) == p["shape"] and v.dtype == DTYPES[p["dtype"]], p
                args.append(jax.device_put(v, device))
            xla_out = [np.asarray(o) for o in exe.execute(args)]

            x_file, y_file = os.path.join(tmp, "x.safetensors"), os.path.join(tmp, "y.safetensors")
            save_file(feed, x_file)
            subprocess.run([a.tessel, "predict", a.export_dir, "--inputs", x_file,
                            "--outputs", y_file], check=True, stdout=subprocess.DEVNULL)
            tessel_out = load_file(y_file)

            for o in sig["outputs"]:
                name, x, t = o["name"], xla_out[o["index"]], tessel_out[o["name"]]
                assert list(x.shape) == o["shape"] and list(t.shape) == o["shape"], (name, x.shape, t.shape)
                pairs = [("tessel", t)]
                if predicted is not None and name in predicted and (b + 1) * batch <= len(predicted[name]):
                    pairs.append(("predict()", predicted[name][b * batch:(b + 1) * batch]))
                for who, other in pairs:
                    key = f"{name} xla vs {who}"
                    if np.issubdtype(x.dtype, np.integer):
                        diff = int(np.sum(x != other))  # rows that differ
                        good = diff == 0 if who == "tessel" else diff <= 1
                    else:
                        diff = float(np.max(np.abs(x.astype(np.float64) - other)))
                        good = diff <= FLOAT_TOL
                    worst[key] = max(worst.get(key, 0), diff)
                    ok &= good
    for key, v in worst.items():
        unit = "rows differ" if isinstance(v, int) else "max abs diff"
        print(f"{key}: {unit} {v}")
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
