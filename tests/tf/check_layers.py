"""Compares tessel's tf.layers with TensorFlow's on one input: conv2d (SAME and VALID strided),
dense, average/max pooling with SAME border windows, batch normalization in training with its
moving-average updates (rank 4, TF's fused kernel, and rank 2).

usage: /tmp/tf/bin/python tests/tf/check_layers.py [DIR]
Runs the ignored test `tf_layers_dump` (which writes DIR/tessel_layers.safetensors from the
interpreter), rebuilds each layer in TF 2.x (tf.compat.v1.layers, eager) with the same weights,
and prints the largest difference per output. Exits 1 when one exceeds 1e-5. Reads safetensors
itself (8-byte header length, JSON header, little-endian data) so TF's venv needs nothing else.
"""
import json, os, struct, subprocess, sys, tempfile
import numpy as np
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

DIR = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="tessel_layers_")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
subprocess.run(["cargo", "test", "--release", "-p", "tessel-estimator", "--test", "tf_layers_dump",
                "--", "--ignored"], cwd=ROOT, check=True, env={**os.environ, "TESSEL_LAYERS_DUMP": DIR})

def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", info
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(info["shape"])
    return out

t = read_safetensors(os.path.join(DIR, "tessel_layers.safetensors"))
x4, x2 = tf.constant(t["x4"]), tf.constant(t["x2"])
L = tf.compat.v1.layers
c = tf.constant_initializer
ours, theirs = {}, {}

def conv(name, **kw):
    return L.Conv2D(kernel_initializer=c(t[f"{name}/kernel"]), bias_initializer=c(t[f"{name}/bias"]), **kw)

theirs["conv_same"] = conv("conv2d", filters=4, kernel_size=3, padding="same", activation=tf.nn.relu)(x4)
theirs["conv_valid_s2"] = conv("conv2d_1", filters=2, kernel_size=(2, 3), strides=2)(x4)
theirs["dense"] = L.Dense(3, kernel_initializer=c(t["dense/kernel"]), bias_initializer=c(t["dense/bias"]))(x2)
theirs["avg_same"] = L.average_pooling2d(x4, 3, 2, padding="same")
theirs["max_same"] = L.max_pooling2d(x4, 3, 2, padding="same")
for name, x, key in [("batch_normalization", x4, "bn4_train"), ("batch_normalization_1", x2, "bn2_train")]:
    bn = L.BatchNormalization(gamma_initializer=c(t[f"{name}/gamma"]), beta_initializer=c(t[f"{name}/beta"]))
    theirs[key] = bn(x, training=True)
    theirs[f"{name}/moving_mean/after"] = bn.moving_mean
    theirs[f"{name}/moving_variance/after"] = bn.moving_variance

worst = 0.0
for key, value in theirs.items():
    mine = t[f"out/{key}"]
    value = np.asarray(value)
    assert mine.shape == value.shape, (key, mine.shape, value.shape)
    diff = float(np.max(np.abs(mine - value)))
    worst = max(worst, diff)
    print(f"{key:40s} {str(mine.shape):16s} max |tessel - tf| = {diff:.2e}")
print(f"tensorflow {tf.__version__}: worst {worst:.2e}")
sys.exit(0 if worst <= 1e-5 else 1)
