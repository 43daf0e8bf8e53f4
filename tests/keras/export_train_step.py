"""The escape hatch of docs/keras.md: a Keras 3 model that tessel's Keras builder refuses (here,
one with a custom layer) trains on tessel as its JAX training step, exported as HLO text and run
by `tessel run --loop`.

    KERAS_BACKEND=jax /tmp/keras3/bin/python tests/keras/export_train_step.py OUT_DIR [MODEL.keras]

With MODEL.keras (and its custom objects importable), that model is exported; without it, a small
model with a custom layer (`ScaledTanh`) is built, compiled and saved to OUT_DIR/model.keras
first. The script writes to OUT_DIR:

- `step.hlo`: the training step `(trainable, non_trainable, optimizer variables, x, y) ->
  ((trainable, non_trainable, optimizer variables), loss)` as HLO text;
- `inputs.safetensors`: its parameters keyed "0", "1", ... in order: the model's state, then the
  batches `x` and `y` stacked STEPS deep (what `tessel run --loop STEPS --infeed I,J` feeds);
- `jax_outputs.safetensors`: what JAX computes running the same step STEPS times: the new state
  keyed as tessel writes it ("0", "1", ...), and the STEPS losses stacked last;
- `command.txt`: the `tessel run` command line.

It needs Keras 3 with the JAX backend (tests/keras/README.md):

    python3 -m venv /tmp/keras3
    /tmp/keras3/bin/pip install keras jax jaxlib h5py numpy
"""

import json
import os
import struct
import sys

os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

STEPS = 5
BATCH = 16


@keras.saving.register_keras_serializable(package="tessel_example")
class ScaledTanh(keras.layers.Layer):
    """A custom layer: `scale * tanh(x)` with a trainable scale per unit."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="scale")

    def call(self, x):
        return self.scale * keras.ops.tanh(x)


def example_model():
    keras.utils.set_random_seed(7)
    x = keras.Input(shape=(8,), name="x")
    h = keras.layers.Dense(16, name="hidden")(x)
    h = ScaledTanh(name="scaled_tanh")(h)
    y = keras.layers.Dense(3, name="logits")(h)
    model = keras.Model(x, y, name="custom_layer_model")
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.05),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
    )
    return model


def batches(model, rng):
    """STEPS batches of a learnable task: the class is the argmax of a fixed linear map."""
    (x_shape,), (y_shape,) = [model.inputs[0].shape[1:]], [model.outputs[0].shape[1:]]
    x = rng.uniform(-1, 1, size=(STEPS, BATCH) + tuple(x_shape)).astype("float32")
    w = rng.standard_normal((x.shape[-1], y_shape[-1])).astype("float32")
    y = np.eye(y_shape[-1], dtype="float32")[np.argmax(x @ w, axis=-1)]
    return x, y


def write_safetensors(path, arrays):
    """`arrays`: (key, numpy array) pairs, f32 or s32."""
    names = {"float32": "F32", "int32": "I32"}
    header, blobs, offset = {}, [], 0
    for key, a in arrays:
        a = np.array(a, order="C")  # (ascontiguousarray would make a scalar 1-D)
        blob = a.tobytes()
        header[key] = {
            "dtype": names[str(a.dtype)],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: export_train_step.py OUT_DIR [MODEL.keras]")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) == 3:
        model = keras.saving.load_model(sys.argv[2])
    else:
        example_model().save(os.path.join(out, "model.keras"))
        model = keras.saving.load_model(os.path.join(out, "model.keras"))

    # The recipe of docs/keras.md, "Escape hatch".
    model.optimizer.build(model.trainable_variables)

    def train_step(state, x, y):
        trainable, non_trainable, opt_vars = state

        def loss_fn(trainable):
            pred, non_trainable_new = model.stateless_call(
                trainable, non_trainable, x, training=True
            )
            return model.compute_loss(y=y, y_pred=pred), non_trainable_new

        (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable)
        trainable, opt_vars = model.optimizer.stateless_apply(opt_vars, grads, trainable)
        return (trainable, non_trainable, opt_vars), loss

    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in model.optimizer.variables],
    )
    x, y = batches(model, np.random.default_rng(3))
    # keep_unused: every state leaf stays a parameter, so parameter i is state leaf i.
    step = jax.jit(train_step, keep_unused=True)
    hlo = step.lower(state, x[0], y[0]).compiler_ir("hlo").as_hlo_text()
    with open(os.path.join(out, "step.hlo"), "w") as f:
        f.write(hlo)

    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(state)]
    n = len(leaves)
    write_safetensors(
        os.path.join(out, "inputs.safetensors"),
        [(str(i), a) for i, a in enumerate(leaves)] + [(str(n), x), (str(n + 1), y)],
    )
    losses = []
    for k in range(STEPS):
        state, loss = step(state, x[k], y[k])
        losses.append(float(loss))
    final = [np.asarray(a) for a in jax.tree_util.tree_leaves(state)]
    write_safetensors(
        os.path.join(out, "jax_outputs.safetensors"),
        [(str(i), a) for i, a in enumerate(final)] + [(str(n), np.asarray(losses, "float32"))],
    )
    command = (
        f"tessel run step.hlo --inputs inputs.safetensors --outputs out.safetensors "
        f"--loop {STEPS} --infeed {n},{n + 1}"
    )
    with open(os.path.join(out, "command.txt"), "w") as f:
        f.write(command + "\n")
    print(command)
    print("JAX losses:", " ".join(f"{v:.6f}" for v in losses))


if __name__ == "__main__":
    main()
