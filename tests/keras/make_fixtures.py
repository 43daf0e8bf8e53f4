"""Writes the Keras fixtures of tessel's Keras tests into estimator/tests/fixtures/keras/.

Run from the repository root, once per Keras (see tests/keras/README.md):

    /tmp/tf/bin/python tests/keras/make_fixtures.py tf_keras
    KERAS_BACKEND=jax /tmp/keras3/bin/python tests/keras/make_fixtures.py keras3
    /tmp/keras3/bin/python tests/keras/make_fixtures.py h5py

For each model, `tf_keras` writes `tf.keras`, `tf.h5` and `tf_savedmodel/` (tf.keras 2.15's
three formats) and `keras3` writes `keras3.keras`. Each Keras also writes, with its prefix
(`tf_` or `keras3_`):
  - `<prefix>predict.npz`: the fixed inputs (keyed by input name) and `model.predict`'s
    outputs on them (keyed `output:<output name>`), from the saved weights;
  - `<prefix>train.npz`: the training batch (inputs keyed by name, targets `target:<output>`);
  - `<prefix>trained.npz`: every layer weight after 3 `train_on_batch` steps on that batch from
    the saved weights, with the dropout layers' rates set to 0 for those steps, keyed `<layer>/<weight>` (`<outer>/<inner>/<weight>` in a nested model).
`h5py` writes `h5py/*.h5`: HDF5 files of kinds Keras does not make (chunked + gzip + shuffle,
compact, big attributes, nested groups, libver="latest", and dense links and attributes and a
filter, which tessel refuses).

The tf.keras SavedModel's `saved_model.pb` (the traced TF graph, 100-300 KB each) is not
kept: tessel reads `keras_metadata.pb` and `variables/` only, and the fixtures stay small.
"""

import json
import os
import shutil
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "estimator", "tests", "fixtures", "keras")
BATCH = 4


def keras_module(which):
    if which == "tf_keras":
        import tensorflow as tf

        return tf.keras
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    return keras


# Each model: (name, build(keras) -> compiled model). Together they cover every layer,
# activation, optimizer, loss and metric tessel's Keras support lists.


def mnist_cnn(k):
    """The TPUEstimator guide's MNIST CNN (small), compiled as the forum question's model."""
    L = k.layers
    m = k.Sequential(
        [
            k.Input(shape=(12, 12, 1), name="image"),
            L.Conv2D(4, 3, activation="relu", name="conv1"),
            L.MaxPooling2D(2, name="pool1"),
            L.Conv2D(6, 3, padding="same", activation="relu", name="conv2"),
            L.MaxPooling2D(2, name="pool2"),
            L.Flatten(name="flatten"),
            L.Dense(16, activation="relu", name="dense1"),
            L.Dropout(0.4, name="dropout"),
            L.Dense(10, activation="softmax", name="logits"),
        ],
        name="mnist_cnn",
    )
    m.compile(
        optimizer=k.optimizers.SGD(learning_rate=0.05, momentum=0.9),
        loss="categorical_crossentropy",
        metrics=["accuracy"],
    )
    return m


def two_in_two_out(k):
    L = k.layers
    a = k.Input(shape=(8,), name="a")
    b = k.Input(shape=(6,), name="b")
    ha = L.Dense(5, activation="tanh", name="dense_a")(a)
    hb = L.Dense(5, activation="sigmoid", name="dense_b")(b)
    h = L.Concatenate(name="concat")([ha, hb])
    cls = L.Dense(3, activation="softmax", name="cls")(h)
    reg = L.Dense(1, name="reg")(h)
    m = k.Model([a, b], [cls, reg], name="two_in_two_out")
    m.compile(
        optimizer=k.optimizers.Adam(learning_rate=0.01),
        loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"},
        metrics={"cls": ["sparse_categorical_accuracy"], "reg": ["mae"]},
    )
    return m


def resnet_block(k):
    L = k.layers
    x = k.Input(shape=(8, 8, 3), name="image")
    h = L.Conv2D(4, 3, padding="same", use_bias=False, name="stem")(x)
    h = L.BatchNormalization(name="stem_bn")(h)
    h = L.ReLU(name="stem_relu")(h)
    r = L.Conv2D(4, 3, padding="same", use_bias=False, name="res_conv")(h)
    r = L.BatchNormalization(momentum=0.9, epsilon=1e-3, name="res_bn")(r)
    h = L.Add(name="add")([h, r])
    h = L.Activation("relu", name="block_relu")(h)
    h = L.GlobalAveragePooling2D(name="gap")(h)
    y = L.Dense(5, name="logits")(h)
    m = k.Model(x, y, name="resnet_block")
    m.compile(
        optimizer=k.optimizers.SGD(learning_rate=0.1, momentum=0.9, nesterov=True),
        loss=k.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["sparse_categorical_accuracy", k.metrics.SparseTopKCategoricalAccuracy(k=2)],
    )
    return m


def text_conv1d(k):
    L = k.layers
    m = k.Sequential(
        [
            k.Input(shape=(10,), dtype="int32", name="tokens"),
            L.Embedding(30, 6, name="embed"),
            L.Conv1D(8, 3, activation="relu", name="conv"),
            L.MaxPooling1D(2, name="pool"),
            L.GlobalMaxPooling1D(name="gmp"),
            L.Dense(1, activation="sigmoid", name="out"),
        ],
        name="text_conv1d",
    )
    m.compile(
        optimizer=k.optimizers.RMSprop(learning_rate=0.01),
        loss="binary_crossentropy",
        metrics=["binary_accuracy", k.metrics.AUC(name="auc")],
    )
    return m


def depthwise_separable(k):
    L = k.layers
    m = k.Sequential(
        [
            k.Input(shape=(10, 10, 2), name="image"),
            L.Conv2D(4, 3, activation="elu", name="conv"),
            L.DepthwiseConv2D(3, depth_multiplier=2, activation="selu", name="depthwise"),
            L.SeparableConv2D(6, 3, padding="same", activation="softplus", name="separable"),
            L.AveragePooling2D(2, name="avg"),
            L.GlobalMaxPooling2D(name="gmp"),
            L.Dense(4, name="logits"),
        ],
        name="depthwise_separable",
    )
    m.compile(
        optimizer=k.optimizers.Adagrad(learning_rate=0.05),
        loss=k.losses.CategoricalCrossentropy(from_logits=True),
        metrics=["categorical_accuracy", k.metrics.TopKCategoricalAccuracy(k=2)],
    )
    return m


def pooling1d(k):
    L = k.layers
    m = k.Sequential(
        [
            k.Input(shape=(12, 3), name="signal"),
            L.Conv1D(5, 3, padding="same", activation="gelu", name="conv"),
            L.AveragePooling1D(2, name="avg"),
            L.SpatialDropout1D(0.2, name="sdrop"),
            L.GlobalAveragePooling1D(name="gap"),
            L.Dense(2, name="out"),
        ],
        name="pooling1d",
    )
    m.compile(
        optimizer=k.optimizers.AdamW(learning_rate=0.01, weight_decay=0.01),
        loss="mae",
        metrics=["mse"],
    )
    return m


def activations_mlp(k):
    L = k.layers
    x = k.Input(shape=(6,), name="x")
    h = L.Dense(8, activation="swish", name="d_swish")(x)
    h = L.Dense(8, activation="silu", name="d_silu")(h)
    h = L.Dense(8, activation="gelu", name="d_gelu")(h)
    h = L.Dense(8, name="d_linear")(h)
    h = L.Activation("tanh", name="act_tanh")(h)
    h = L.Activation("elu", name="act_elu")(h)
    h = L.Activation("selu", name="act_selu")(h)
    h = L.Activation("softplus", name="act_softplus")(h)
    h = L.Activation("sigmoid", name="act_sigmoid")(h)
    y = L.Dense(2, activation="relu", name="out")(h)
    m = k.Model(x, y, name="activations_mlp")
    m.compile(
        optimizer=k.optimizers.SGD(learning_rate=0.1),
        loss=k.losses.Huber(delta=0.5),
        metrics=["mae"],
    )
    return m


def layer_norm_mlp(k):
    L = k.layers
    schedule = k.optimizers.schedules.ExponentialDecay(
        initial_learning_rate=0.02, decay_steps=2, decay_rate=0.5
    )
    m = k.Sequential(
        [
            k.Input(shape=(7,), name="x"),
            L.Dense(9, name="d1"),
            L.LayerNormalization(name="ln"),
            L.LeakyReLU(0.2, name="leaky"),
            L.Dense(4, name="d2"),
            L.Softmax(name="softmax"),
        ],
        name="layer_norm_mlp",
    )
    m.compile(
        optimizer=k.optimizers.Adam(learning_rate=schedule),
        loss="categorical_crossentropy",
        metrics=["categorical_accuracy"],
    )
    return m


def zero_pad_reshape(k):
    L = k.layers
    m = k.Sequential(
        [
            k.Input(shape=(36,), name="flat"),
            L.Reshape((6, 6, 1), name="reshape"),
            L.ZeroPadding2D(((1, 0), (2, 1)), name="pad"),
            L.Conv2D(3, 3, activation="relu", name="conv"),
            L.SpatialDropout2D(0.25, name="sdrop"),
            L.AveragePooling2D(2, name="avg"),
            L.Flatten(name="flatten"),
            L.Dense(3, name="out"),
        ],
        name="zero_pad_reshape",
    )
    m.compile(
        optimizer=k.optimizers.RMSprop(learning_rate=0.01, rho=0.8, momentum=0.5),
        loss="mse",
        metrics=["mae", "mse"],
    )
    return m


def gated_regularized(k):
    L = k.layers
    x = k.Input(shape=(5,), name="x")
    h = L.Dense(
        6,
        activation="relu",
        kernel_regularizer=k.regularizers.L2(0.01),
        name="hidden",
    )(x)
    g = L.Dense(6, activation="sigmoid", kernel_regularizer=k.regularizers.L1(0.005), name="gate")(x)
    h = L.Multiply(name="gated")([h, g])
    y = L.Dense(
        1, kernel_regularizer=k.regularizers.L1L2(l1=0.001, l2=0.002), name="logit"
    )(h)
    m = k.Model(x, y, name="gated_regularized")
    m.compile(
        optimizer=k.optimizers.Adagrad(learning_rate=0.1, initial_accumulator_value=0.05),
        loss=k.losses.BinaryCrossentropy(from_logits=True),
        metrics=[k.metrics.BinaryAccuracy(threshold=0.0), k.metrics.AUC(from_logits=True, name="auc")],
    )
    return m


def shared_layers(k):
    L = k.layers
    left = k.Input(shape=(4,), name="left")
    right = k.Input(shape=(4,), name="right")
    shared = L.Dense(3, activation="relu", name="shared")
    h = L.Add(name="sum")([shared(left), shared(right)])
    y = L.Dense(2, activation="softmax", name="out")(h)
    m = k.Model([left, right], y, name="shared_layers")
    m.compile(
        optimizer=k.optimizers.SGD(learning_rate=0.05, momentum=0.5),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return m


def nested_sequential(k):
    L = k.layers
    inner = k.Sequential(
        [k.Input(shape=(6,)), L.Dense(5, activation="relu", name="inner_dense"), L.Dense(3, name="inner_out")],
        name="inner",
    )
    x = k.Input(shape=(4,), name="x")
    h = L.Dense(6, name="outer_dense")(x)
    y = L.Activation("softmax", name="probs")(inner(h))
    m = k.Model(x, y, name="nested_sequential")
    m.compile(
        optimizer=k.optimizers.Adam(learning_rate=0.01, beta_1=0.8, epsilon=1e-6),
        loss="categorical_crossentropy",
        metrics=["accuracy", k.metrics.TopKCategoricalAccuracy(k=2)],
    )
    return m


def nested_functional(k):
    """A Functional model used as a layer and called twice (shared), then a Sequential built
    by being called (no Input of its own) with batch normalization."""
    L = k.layers
    a = k.Input(shape=(5,), name="tower_in")
    h = L.Dense(4, activation="tanh", name="tower_dense")(a)
    tower = k.Model(a, L.Dense(4, name="tower_out")(h), name="tower")
    head = k.Sequential(
        [L.Dense(6, name="head_dense"), L.BatchNormalization(momentum=0.7, name="head_bn"), L.Dense(2, name="head_out")],
        name="head",
    )
    left = k.Input(shape=(5,), name="left")
    right = k.Input(shape=(5,), name="right")
    merged = L.Concatenate(name="concat")([tower(left), tower(right)])
    m = k.Model([left, right], head(merged), name="nested_functional")
    m.compile(
        optimizer=k.optimizers.SGD(learning_rate=0.1, momentum=0.9),
        loss="mse",
        metrics=["mae"],
    )
    return m


def bn_mlp(k):
    L = k.layers
    m = k.Sequential(
        [
            k.Input(shape=(5,), name="x"),
            L.Dense(6, name="d1"),
            L.BatchNormalization(center=False, momentum=0.5, name="bn"),
            L.ReLU(max_value=6.0, name="relu6"),
            L.Dropout(0.1, name="drop"),
            L.Dense(1, name="out"),
        ],
        name="bn_mlp",
    )
    m.compile(
        optimizer=k.optimizers.SGD(learning_rate=0.05, momentum=0.9, nesterov=True),
        loss="mse",
        metrics=["mse"],
    )
    return m


MODELS = [
    mnist_cnn,
    two_in_two_out,
    resnet_block,
    text_conv1d,
    depthwise_separable,
    pooling1d,
    activations_mlp,
    layer_norm_mlp,
    zero_pad_reshape,
    gated_regularized,
    shared_layers,
    nested_sequential,
    bn_mlp,
    nested_functional,
]


def input_arrays(model, rng):
    """Fixed inputs: floats in [-1, 1), or token ids for integer inputs."""
    out = {}
    for t in model.inputs:
        name = t.name.split(":")[0]
        shape = (BATCH,) + tuple(t.shape[1:])
        if "int" in str(t.dtype):
            out[name] = rng.integers(0, 30, size=shape).astype("int32")
        else:
            out[name] = rng.uniform(-1, 1, size=shape).astype("float32")
    return out


def output_names(model):
    """The outputs' names (Keras 3's Sequential has no `output_names`: its last layer's)."""
    names = getattr(model, "output_names", None)
    return list(names) if names else [model.layers[-1].name]


def target_arrays(model, rng):
    out = {}
    loss = model.loss
    for i, t in enumerate(model.outputs):
        name = output_names(model)[i]
        shape = (BATCH,) + tuple(t.shape[1:])
        this = loss.get(name) if isinstance(loss, dict) else loss
        text = str(getattr(this, "name", this) or "")
        if "sparse" in text:
            out[name] = rng.integers(0, shape[-1], size=(BATCH,)).astype("int32")
        elif "categorical" in text:
            out[name] = np.eye(shape[-1], dtype="float32")[rng.integers(0, shape[-1], size=BATCH)]
        elif "binary" in text:
            out[name] = rng.integers(0, 2, size=shape).astype("float32")
        else:
            out[name] = rng.uniform(-1, 1, size=shape).astype("float32")
    return out


def layer_weights(model, prefix=""):
    """`<layer>/<weight>` → value, nested models as `<outer>/<inner>/<weight>`."""
    out = {}
    for layer in model.layers:
        if hasattr(layer, "layers") and layer.layers:
            out.update(layer_weights(layer, prefix + layer.name + "/"))
            continue
        for w in layer.weights:
            short = w.name.split("/")[-1].split(":")[0]
            out[prefix + layer.name + "/" + short] = np.asarray(w.numpy() if hasattr(w, "numpy") else w)
    return out


def save_model_files(which, k, model, folder):
    if which == "keras3":
        model.save(os.path.join(folder, "keras3.keras"))
        return
    model.save(os.path.join(folder, "tf.keras"), save_format="keras")
    model.save(os.path.join(folder, "tf.h5"), save_format="h5")
    sm = os.path.join(folder, "tf_savedmodel")
    shutil.rmtree(sm, ignore_errors=True)
    model.save(sm, save_format="tf")
    os.remove(os.path.join(sm, "saved_model.pb"))
    os.remove(os.path.join(sm, "fingerprint.pb"))
    shutil.rmtree(os.path.join(sm, "assets"), ignore_errors=True)


def make_models(which, only=()):
    k = keras_module(which)
    prefix = "tf_" if which == "tf_keras" else "keras3_"
    for i, build in enumerate(MODELS):
        if only and build.__name__ not in only:
            continue
        k.utils.set_random_seed(1000 + i)
        rng = np.random.default_rng(i)
        model = build(k)
        folder = os.path.join(OUT, build.__name__)
        os.makedirs(folder, exist_ok=True)
        x = input_arrays(model, rng)
        y = target_arrays(model, rng)
        save_model_files(which, k, model, folder)
        feed = [x[t.name.split(":")[0]] for t in model.inputs]
        pred = model.predict(feed, verbose=0)
        if not isinstance(pred, (list, tuple)):
            pred = [pred]
        np.savez(
            os.path.join(folder, prefix + "predict.npz"),
            **x,
            **{"output:" + n: p for n, p in zip(output_names(model), pred)},
        )
        np.savez(
            os.path.join(folder, prefix + "train.npz"),
            **x,
            **{"target:" + n: v for n, v in y.items()},
        )
        targets = [y[n] for n in output_names(model)]
        # Dropout masks are random: the 3 training steps run with every dropout rate at 0
        # (set before the train function is first traced) so that they can be reproduced.
        for layer in model.layers:
            if isinstance(layer, k.layers.Dropout):
                layer.rate = 0.0
        for _ in range(3):
            model.train_on_batch(feed, targets if len(targets) > 1 else targets[0])
        np.savez(os.path.join(folder, prefix + "trained.npz"), **layer_weights(model))
        print(which, build.__name__, "ok")


def make_h5py_files():
    import h5py

    folder = os.path.join(OUT, "h5py")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((37, 21)).astype("float32")
    reference = {}
    with h5py.File(os.path.join(folder, "chunked_gzip_shuffle.h5"), "w") as f:
        f.create_dataset("a", data=a, chunks=(8, 5), compression="gzip", shuffle=True)
        f.create_dataset("gzip_only", data=a.astype("float64"), chunks=(10, 21), compression="gzip", compression_opts=9)
        f.create_dataset("ints", data=np.arange(-50, 50, dtype="int64").reshape(10, 10), chunks=(3, 4), shuffle=True)
    reference["chunked_gzip_shuffle.h5"] = {"a": a.tolist()}
    with h5py.File(os.path.join(folder, "compact.h5"), "w") as f:
        space = h5py.h5s.create_simple((3, 4))
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_layout(h5py.h5d.COMPACT)
        ds = h5py.h5d.create(f.id, b"small", h5py.h5t.IEEE_F32LE, space, plist)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(12, dtype="float32").reshape(3, 4))
        f.create_dataset("scalar", data=np.float32(2.5))
        f.create_dataset("empty", shape=(0, 3), dtype="float32")
    with h5py.File(os.path.join(folder, "big_attributes.h5"), "w") as f:
        big = json.dumps({"layers": [{"name": "layer_%d" % i, "units": i} for i in range(2000)]})
        f.attrs["model_config"] = big
        f.attrs["weight_names"] = ["layer_%d/kernel:0" % i for i in range(1000)]
        f.attrs["fixed"] = np.bytes_("fixed-length text")
        f.attrs["numbers"] = np.arange(5, dtype="float64")
        f.attrs["count"] = np.int32(-7)
        reference["big_attributes.h5"] = {"model_config_len": len(big)}
    with h5py.File(os.path.join(folder, "nested_groups.h5"), "w") as f:
        for i in range(40):
            f.create_dataset("g%d/h%d/d" % (i % 5, i), data=np.full((2,), i, dtype="float32"))
        f["g0"].attrs["note"] = "group five"
    with h5py.File(os.path.join(folder, "libver_latest.h5"), "w", libver="latest") as f:
        f.create_dataset("g/x", data=np.arange(6, dtype="float32").reshape(2, 3))
        f.create_dataset("g/chunked", data=a, chunks=a.shape, compression="gzip")
        f["g"].attrs["name"] = "latest"
    with h5py.File(os.path.join(folder, "many_links_latest.h5"), "w", libver="latest") as f:
        for i in range(20):
            f.create_dataset("d%02d" % i, data=np.float32(i))
    with h5py.File(os.path.join(folder, "many_attributes_latest.h5"), "w", libver="latest") as f:
        for i in range(12):
            f.attrs["a%02d" % i] = np.float32(i)
    with h5py.File(os.path.join(folder, "foreign_types.h5"), "w") as f:
        f.create_dataset("big_endian", data=np.arange(4, dtype=">f4"))
        f.create_dataset("bools", data=np.array([True, False]))
        f.create_dataset("pairs", data=np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]))
        f.create_dataset("target", data=np.float32(1))
        f["soft"] = h5py.SoftLink("/target")
        f["external"] = h5py.ExternalLink("elsewhere.h5", "/x")
    with h5py.File(os.path.join(folder, "lzf_filter.h5"), "w") as f:
        f.create_dataset("a", data=a, chunks=(8, 8), compression="lzf")
    with open(os.path.join(folder, "reference.json"), "w") as out:
        json.dump(reference, out)
    print("h5py ok")


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    if which in ("tf_keras", "keras3"):
        make_models(which, sys.argv[2:])
    elif which == "h5py":
        make_h5py_files()
    else:
        sys.exit("usage: make_fixtures.py tf_keras | keras3 [MODEL ...] | h5py")
