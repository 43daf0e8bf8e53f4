"""The forum question's model on MNIST: a Sequential CNN compiled with SGD(lr, momentum=0.9) and
categorical_crossentropy, saved by tf.keras 2.15, trained by TF's
`tf.keras.estimator.model_to_estimator` here, and by `tessel keras train` (tests/keras/mnist_vs_tf.sh).

    python mnist_vs_tf.py prepare IDX_DIR OUT_DIR   # writes model.keras, train.npz, test.npz
    python mnist_vs_tf.py tf OUT_DIR STEPS BATCH     # TF's model_to_estimator: train, then evaluate

Needs TensorFlow 2.15 (`/tmp/tf`, see tests/keras/README.md).
"""

import gzip
import os
import sys
import time

import numpy as np


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(idx_dir, prefix):
    x = read_idx(os.path.join(idx_dir, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(idx_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (x.astype(np.float32) / 255.0).reshape(-1, 28, 28, 1)
    return x, np.eye(10, dtype=np.float32)[y]


def model(tf, lr):
    k = tf.keras
    m = k.Sequential(
        [
            k.Input(shape=(28, 28, 1), name="image"),
            k.layers.Conv2D(32, 5, padding="same", activation="relu"),
            k.layers.MaxPooling2D(2),
            k.layers.Conv2D(64, 5, padding="same", activation="relu"),
            k.layers.MaxPooling2D(2),
            k.layers.Flatten(),
            k.layers.Dense(1024, activation="relu"),
            k.layers.Dropout(0.4),
            k.layers.Dense(10, activation="softmax"),
        ]
    )
    m.compile(
        optimizer=k.optimizers.SGD(learning_rate=lr, momentum=0.9),
        loss="categorical_crossentropy",
        metrics=["accuracy"],
    )
    return m


def prepare(idx_dir, out):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(1)
    os.makedirs(out, exist_ok=True)
    model(tf, 0.01).save(os.path.join(out, "model.keras"))
    for prefix, name in [("train", "train"), ("t10k", "test")]:
        x, y = load(idx_dir, prefix)
        np.savez(os.path.join(out, f"{name}.npz"), x=x, y=y)
    print(f"wrote {out}/model.keras, train.npz, test.npz")


def run_tf(out, steps, batch):
    import tensorflow as tf

    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    keras_model = tf.keras.models.load_model(os.path.join(out, "model.keras"))
    train = np.load(os.path.join(out, "train.npz"))
    test = np.load(os.path.join(out, "test.npz"))
    model_dir = os.path.join(out, "tf_model_dir")
    est = tf.keras.estimator.model_to_estimator(keras_model=keras_model, model_dir=model_dir)

    def train_fn():
        ds = tf.data.Dataset.from_tensor_slices(({"image": train["x"]}, train["y"]))
        return ds.shuffle(10000, seed=1).repeat().batch(batch, drop_remainder=True)

    def eval_fn():
        ds = tf.data.Dataset.from_tensor_slices(({"image": test["x"]}, test["y"]))
        return ds.batch(batch)

    start = time.time()
    est.train(train_fn, max_steps=steps)
    train_s = time.time() - start
    start = time.time()
    result = est.evaluate(eval_fn)
    eval_s = time.time() - start
    print(
        f"tf steps {steps} batch {batch} train_s {train_s:.1f} eval_s {eval_s:.1f} "
        f"accuracy {result['accuracy']:.4f} loss {result['loss']:.4f}"
    )


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "tf":
        run_tf(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
