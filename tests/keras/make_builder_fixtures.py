"""Fixtures for tessel's Keras model builder (estimator/tests/keras_model/).

For each small model below and each Keras (tf.keras 2.15, and Keras 3 on the JAX backend) this
writes estimator/tests/fixtures/keras_builder/<keras>_<model>/:
  model.json    {"keras_version", "model_config" (model.to_json()), "compile_config"}
  weights.npz   the weights before training, keyed "<layer>/<i>:<weight name>" in layer.weights order
  io.npz        "in:<input>" fixed inputs and "out:<output>" Keras's predict() on them;
                "x:<input>" / "y:<output>" the training batch
  trained.npz   the weights after 3 train_on_batch steps on that batch (models without dropout)
  summary.json  per layer: name, class, output shape, parameter count; totals

Run (needs both environments):
  python3 -m venv /tmp/tf && /tmp/tf/bin/pip install "tensorflow-cpu==2.15.1"
  python3 -m venv /tmp/keras3 && /tmp/keras3/bin/pip install "keras==3.*" "jax[cpu]"
  /tmp/tf/bin/python tests/keras/make_builder_fixtures.py tf
  KERAS_BACKEND=jax /tmp/keras3/bin/python tests/keras/make_builder_fixtures.py keras3
"""
import json
import os
import sys

import numpy as np

FLAVOUR = sys.argv[1]
if FLAVOUR == "tf":
    import tensorflow as tf
    keras = tf.keras
    tf.keras.utils.set_random_seed(7)
elif FLAVOUR == "keras3":
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras
    keras.utils.set_random_seed(7)
else:
    raise SystemExit("usage: make_builder_fixtures.py tf|keras3")

L = keras.layers
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "estimator", "tests", "fixtures", "keras_builder")
rng = np.random.default_rng(11)


def mnist_cnn():
    m = keras.Sequential([
        keras.Input((12, 12, 1), name="image"),
        L.Conv2D(4, 3, padding="same", activation="relu"),
        L.MaxPooling2D(2),
        L.Conv2D(6, 3, padding="same", activation="relu"),
        L.MaxPooling2D(2),
        L.Flatten(),
        L.Dense(16, activation="relu"),
        L.Dense(10, activation="softmax"),
    ], name="mnist_cnn")
    m.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
              loss="categorical_crossentropy", metrics=["accuracy"])
    x = {"image": rng.random((8, 12, 12, 1), dtype=np.float32)}
    y = {"y": np.eye(10, dtype=np.float32)[rng.integers(0, 10, 8)]}
    return m, x, y


def two_in_two_out():
    a = keras.Input((6,), name="in_a")
    b = keras.Input((4,), name="in_b")
    pa = L.Dense(4, name="proj_a")(a)
    shared = L.Dense(5, activation="tanh", name="shared")
    sa, sb = shared(pa), shared(b)
    h = L.Concatenate(name="concat")([L.Add(name="add")([sa, sb]), L.Multiply(name="mul")([sa, sb])])
    cls = L.Dense(3, activation="softmax", name="cls")(h)
    reg = L.Dense(1, name="reg")(h)
    m = keras.Model([a, b], [cls, reg], name="two_in_two_out")
    m.compile(optimizer=keras.optimizers.Adam(0.01),
              loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"},
              loss_weights={"cls": 1.0, "reg": 0.5},
              metrics={"cls": ["sparse_categorical_accuracy"], "reg": ["mae"]})
    x = {"in_a": rng.normal(size=(8, 6)).astype(np.float32), "in_b": rng.normal(size=(8, 4)).astype(np.float32)}
    y = {"cls": rng.integers(0, 3, (8,)).astype(np.int32), "reg": rng.normal(size=(8, 1)).astype(np.float32)}
    return m, x, y


def resnet_block():
    x_in = keras.Input((6, 6, 3), name="image")
    h = L.Conv2D(4, 3, padding="same", use_bias=False, name="conv_a")(x_in)
    h = L.BatchNormalization(name="bn_a")(h)
    h = L.ReLU(name="relu_a")(h)
    # No bias before batch normalization: its gradient is zero up to rounding, which Adam
    # would scale to full steps of noise.
    h = L.Conv2D(4, 3, padding="same", use_bias=False, name="conv_b")(h)
    h = L.BatchNormalization(name="bn_b", momentum=0.9)(h)
    s = L.Conv2D(4, 1, name="shortcut")(x_in)
    h = L.Add(name="add")([h, s])
    h = L.Activation("relu", name="relu_out")(h)
    h = L.GlobalAveragePooling2D(name="gap")(h)
    out = L.Dense(3, activation="softmax", name="probs")(h)
    m = keras.Model(x_in, out, name="resnet_block")
    m.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    x = {"image": rng.normal(size=(8, 6, 6, 3)).astype(np.float32)}
    y = {"probs": rng.integers(0, 3, (8,)).astype(np.int32)}
    return m, x, y


def text_conv1d():
    t = keras.Input((10,), dtype="int32", name="tokens")
    h = L.Embedding(20, 6, name="embed")(t)
    h = L.Conv1D(5, 3, activation="relu", name="conv")(h)
    h = L.GlobalMaxPooling1D(name="gmp")(h)
    out = L.Dense(1, activation="sigmoid", name="out")(h)
    m = keras.Model(t, out, name="text_conv1d")
    m.compile(optimizer=keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
              loss="binary_crossentropy", metrics=["binary_accuracy", keras.metrics.AUC(name="auc")])
    x = {"tokens": rng.integers(0, 20, (8, 10)).astype(np.int32)}
    y = {"out": rng.integers(0, 2, (8, 1)).astype(np.float32)}
    return m, x, y


def separable():
    x_in = keras.Input((8, 8, 2), name="image")
    h = L.ZeroPadding2D(1, name="pad")(x_in)
    h = L.DepthwiseConv2D(3, depth_multiplier=2, name="dw")(h)
    h = L.SeparableConv2D(4, 3, padding="same", activation="relu", name="sep")(h)
    h = L.AveragePooling2D(2, name="avg")(h)
    h = L.LeakyReLU(0.2, name="leaky")(h)
    h = L.LayerNormalization(name="ln")(h)
    h = L.GlobalMaxPooling2D(name="gmp")(h)
    h = L.Dense(3, name="logits")(h)
    out = L.Softmax(name="softmax")(h)
    m = keras.Model(x_in, out, name="separable")
    opt = keras.optimizers.AdamW(0.01, weight_decay=0.05)
    m.compile(optimizer=opt, loss="categorical_crossentropy", metrics=["categorical_accuracy"])
    x = {"image": rng.normal(size=(8, 8, 8, 2)).astype(np.float32)}
    y = {"softmax": np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]}
    return m, x, y


def seq1d():
    m = keras.Sequential([
        keras.Input((12, 3), name="signal"),
        L.Conv1D(4, 3, padding="same", name="conv"),
        L.MaxPooling1D(2, name="maxp"),
        L.AveragePooling1D(2, padding="same", name="avgp"),
        L.Activation("elu", name="elu"),
        L.GlobalAveragePooling1D(name="gap"),
        L.Dense(2, name="out"),
    ], name="seq1d")
    m.compile(optimizer=keras.optimizers.Adagrad(0.1, initial_accumulator_value=0.1),
              loss=keras.losses.Huber(), metrics=["mae", "mse"])
    x = {"signal": rng.normal(size=(8, 12, 3)).astype(np.float32)}
    y = {"out": rng.normal(size=(8, 2)).astype(np.float32)}
    return m, x, y


def activations():
    m = keras.Sequential([keras.Input((5,), name="x")] + [
        L.Dense(4, activation=a, name=f"d_{a}")
        for a in ["gelu", "swish", "selu", "softplus", "elu", "tanh", "sigmoid", "relu", "linear"]
    ] + [L.Dense(3, activation="softmax", name="probs")], name="activations")
    lr = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    m.compile(optimizer=keras.optimizers.SGD(lr, momentum=0.8, nesterov=True),
              loss=keras.losses.CategoricalCrossentropy(), metrics=["accuracy", keras.metrics.TopKCategoricalAccuracy(k=2, name="top2")])
    x = {"x": rng.normal(size=(8, 5)).astype(np.float32)}
    y = {"probs": np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]}
    return m, x, y


def regularized():
    m = keras.Sequential([
        keras.Input((6,), name="x"),
        L.Dense(8, activation="relu", kernel_regularizer=keras.regularizers.L2(0.01), name="h1"),
        L.Dense(4, kernel_regularizer=keras.regularizers.L1(0.02), name="h2"),
        L.Reshape((2, 2), name="reshape"),
        L.Flatten(name="flat"),
        L.Dense(3, name="logits"),
    ], name="regularized")
    lr = keras.optimizers.schedules.PiecewiseConstantDecay([1, 2], [0.1, 0.05, 0.01])
    m.compile(optimizer=keras.optimizers.SGD(lr, clipnorm=1.0),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=[keras.metrics.SparseTopKCategoricalAccuracy(k=2, name="top2")])
    x = {"x": rng.normal(size=(8, 6)).astype(np.float32)}
    y = {"logits": rng.integers(0, 3, (8,)).astype(np.int32)}
    return m, x, y


def dropouts():
    m = keras.Sequential([
        keras.Input((4, 4, 2), name="image"),
        L.SpatialDropout2D(0.3, name="sd2"),
        L.Reshape((16, 2), name="reshape"),
        L.SpatialDropout1D(0.2, name="sd1"),
        L.Flatten(name="flat"),
        L.Dropout(0.5, name="drop"),
        L.Dense(2, name="out"),
    ], name="dropouts")
    m.compile(optimizer="sgd", loss="mse")
    x = {"image": rng.normal(size=(8, 4, 4, 2)).astype(np.float32)}
    y = {"out": rng.normal(size=(8, 2)).astype(np.float32)}
    return m, x, y


MODELS = {
    "mnist_cnn": (mnist_cnn, True),
    "two_in_two_out": (two_in_two_out, True),
    "resnet_block": (resnet_block, True),
    "text_conv1d": (text_conv1d, True),
    "separable": (separable, True),
    "seq1d": (seq1d, True),
    "activations": (activations, True),
    "regularized": (regularized, True),
    "dropouts": (dropouts, False),
}


def weights_of(m):
    out = {}
    for layer in m.layers:
        for i, w in enumerate(layer.weights):
            name = w.name.split("/")[-1].split(":")[0]
            out[f"{layer.name}/{i}:{name}"] = np.asarray(w.numpy() if hasattr(w, "numpy") else w)
    return out


def output_names(m):
    return [t.name.split("/")[0] if FLAVOUR == "tf" else t._keras_history[0].name for t in m.outputs]


def layer_summary(m):
    rows = []
    for layer in m.layers:
        try:
            shape = layer.output.shape
            shape = [None if d is None else int(d) for d in shape]
        except Exception:
            shape = None
        rows.append({"name": layer.name, "class": layer.__class__.__name__,
                     "output_shape": shape, "params": int(layer.count_params())})
    trainable = int(sum(np.prod(w.shape) for w in m.trainable_weights))
    non_trainable = int(sum(np.prod(w.shape) for w in m.non_trainable_weights))
    return {"layers": rows, "trainable": trainable, "non_trainable": non_trainable,
            "total": trainable + non_trainable}


def one_or_list(arrays):
    return arrays[0] if len(arrays) == 1 else arrays


def main():
    for name, (make, train) in MODELS.items():
        m, x, y = make()
        outs = output_names(m)
        ins = [t.name.split(":")[0] if FLAVOUR == "tf" else t._keras_history[0].name for t in m.inputs]
        y = dict(zip(outs, y.values()))
        d = os.path.join(OUT, f"{FLAVOUR}_{name}")
        os.makedirs(d, exist_ok=True)
        config = json.loads(m.to_json())
        meta = {"keras_version": (keras.__version__ if FLAVOUR == "keras3" else tf.__version__), "model_config": config,
                "compile_config": m.get_compile_config(), "inputs": ins, "outputs": outs}
        with open(os.path.join(d, "model.json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(layer_summary(m), f, indent=1)
        np.savez(os.path.join(d, "weights.npz"), **weights_of(m))
        fixed = {}
        for n, t in zip(ins, m.inputs):
            shape = [5] + [int(s) for s in t.shape[1:]]
            if "int" in str(t.dtype):
                fixed[n] = rng.integers(0, 20, shape).astype(np.int32)
            else:
                fixed[n] = rng.normal(size=shape).astype(np.float32)
        pred = m.predict(one_or_list([fixed[n] for n in ins]), verbose=0)
        if not isinstance(pred, list):
            pred = [pred]
        io = {f"in:{n}": v for n, v in fixed.items()}
        io.update({f"out:{n}": np.asarray(p) for n, p in zip(outs, pred)})
        io.update({f"x:{n}": v for n, v in x.items()})
        io.update({f"y:{n}": v for n, v in y.items()})
        if train:
            losses = []
            for _ in range(3):
                r = m.train_on_batch(one_or_list([x[n] for n in ins]),
                                     one_or_list([y[n] for n in outs]), return_dict=True)
                losses.append(float(r["loss"]))
            io["losses"] = np.array(losses, dtype=np.float32)
            np.savez(os.path.join(d, "trained.npz"), **weights_of(m))
        np.savez(os.path.join(d, "io.npz"), **io)
        print(d, "ok")


main()
