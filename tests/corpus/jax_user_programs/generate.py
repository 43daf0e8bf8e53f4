"""Writes the project's own JAX corpus: ordinary programs a user writes, lowered to HLO text by JAX,
with their inputs and JAX's outputs.

Run it through `generate.sh` (which makes a pinned Python environment); the outputs are committed,
so tests never need Python. `TESSEL_CORPUS_ONLY=a,b` writes only programs a and b (the others are
still built, so that the shared random inputs stay the same, and keep their rows in the manifest). For each program NAME it writes, beside this file:
- `NAME.hlo`: `jax.jit(fn).lower(*args).as_text(dialect="hlo", debug_info=True)`;
- `NAME.inputs.safetensors`: the flattened arguments keyed "0", "1", ... (entry parameter order);
- `NAME.outputs.safetensors`: the flattened results keyed "0", "1", ...;
- for a scalar function with `wrt`: `NAME.grad_outputs.safetensors`, "0" the value and "1", ... the
  gradients with respect to the listed parameters (as `tessel grad --wrt` orders them);
and `manifest.tsv`: name, replicas, relative tolerance, grad parameters, what it checks.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(20261123)
PROGRAMS = []


def program(name, what, replicas=1, rtol=1e-4, wrt=None):
    def register(build):
        PROGRAMS.append((name, what, replicas, rtol, wrt, build))
        return build

    return register


def normal(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def uniform(*shape, lo=0.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


# ---------------------------------------------------------------- a small model and optimizers
def mlp_params():
    return {
        "w1": normal(8, 16, scale=0.3),
        "b1": normal(16, scale=0.1),
        "w2": normal(16, 4, scale=0.3),
        "b2": np.zeros(4, np.float32),
    }


def mlp_loss(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)


def like(p, f):
    return jax.tree.map(lambda a: f(*a.shape), p)


def batch():
    return normal(32, 8), normal(32, 4)


@program("sgd_momentum_step", "momentum SGD, one step of a 2-layer MLP")
def _():
    def step(p, mom, x, y):
        g = jax.grad(mlp_loss)(p, x, y)
        mom = jax.tree.map(lambda m, g: 0.9 * m + g, mom, g)
        return jax.tree.map(lambda p, m: p - 0.05 * m, p, mom), mom

    p = mlp_params()
    return step, (p, like(p, lambda *s: normal(*s, scale=0.01)), *batch())


@program("sgd_nesterov_step", "Nesterov momentum (optax.sgd(nesterov=True))")
def _():
    def step(p, mom, x, y):
        g = jax.grad(mlp_loss)(p, x, y)
        mom = jax.tree.map(lambda m, g: 0.9 * m + g, mom, g)
        upd = jax.tree.map(lambda m, g: 0.9 * m + g, mom, g)
        return jax.tree.map(lambda p, u: p - 0.05 * u, p, upd), mom

    p = mlp_params()
    return step, (p, like(p, lambda *s: normal(*s, scale=0.01)), *batch())


def adam_moments(g, m, v, count, b1=0.9, b2=0.999):
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    c1 = 1 - b1 ** count.astype(jnp.float32)
    c2 = 1 - b2 ** count.astype(jnp.float32)
    return m, v, c1, c2


@program("adam_step", "optax-style Adam: bias correction 1 - b^t from an s32 step counter")
def _():
    def step(p, m, v, count, x, y):
        g = jax.grad(mlp_loss)(p, x, y)
        count = count + 1
        m, v, c1, c2 = adam_moments(g, m, v, count)
        p = jax.tree.map(lambda p, m, v: p - 1e-3 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), p, m, v)
        return p, m, v, count

    p = mlp_params()
    return step, (
        p,
        like(p, lambda *s: normal(*s, scale=0.01)),
        like(p, lambda *s: uniform(*s, hi=0.01)),
        jnp.int32(3),
        *batch(),
    )


@program("adamw_step", "AdamW: Adam with decoupled weight decay")
def _():
    def step(p, m, v, count, x, y):
        g = jax.grad(mlp_loss)(p, x, y)
        count = count + 1
        m, v, c1, c2 = adam_moments(g, m, v, count)
        p = jax.tree.map(
            lambda p, m, v: p - 1e-3 * ((m / c1) / (jnp.sqrt(v / c2) + 1e-8) + 1e-2 * p), p, m, v
        )
        return p, m, v, count

    p = mlp_params()
    return step, (
        p,
        like(p, lambda *s: normal(*s, scale=0.01)),
        like(p, lambda *s: uniform(*s, hi=0.01)),
        jnp.int32(7),
        *batch(),
    )


@program("rmsprop_step", "RMSProp")
def _():
    def step(p, ms, x, y):
        g = jax.grad(mlp_loss)(p, x, y)
        ms = jax.tree.map(lambda s, g: 0.9 * s + 0.1 * g * g, ms, g)
        return jax.tree.map(lambda p, s, g: p - 1e-3 * g / (jnp.sqrt(s) + 1e-7), p, ms, g), ms

    p = mlp_params()
    return step, (p, like(p, lambda *s: uniform(*s, hi=0.01)), *batch())


@program("adagrad_step", "Adagrad")
def _():
    def step(p, acc, x, y):
        g = jax.grad(mlp_loss)(p, x, y)
        acc = jax.tree.map(lambda a, g: a + g * g, acc, g)
        return jax.tree.map(lambda p, a, g: p - 0.1 * g * lax.rsqrt(a + 1e-7), p, acc, g), acc

    p = mlp_params()
    return step, (p, like(p, lambda *s: uniform(*s, lo=0.1, hi=0.2)), *batch())


@program("adam_scan_loop", "an Adam training loop of 5 steps in lax.scan (a while loop with state)")
def _():
    def train(p, m, v, count, xs, ys):
        def body(carry, xy):
            p, m, v, count = carry
            l, g = jax.value_and_grad(mlp_loss)(p, *xy)
            count = count + 1
            m, v, c1, c2 = adam_moments(g, m, v, count)
            p = jax.tree.map(lambda p, m, v: p - 1e-2 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), p, m, v)
            return (p, m, v, count), l

        return lax.scan(body, (p, m, v, count), (xs, ys))

    p = mlp_params()
    return train, (p, like(p, lambda *s: np.zeros(s, np.float32)), like(p, lambda *s: np.zeros(s, np.float32)), jnp.int32(0), normal(5, 32, 8), normal(5, 32, 4))


# ---------------------------------------------------------------- layers and ops
@program("layer_norm", "layer normalization over the last axis, with scale and offset", wrt=[0, 1, 2])
def _():
    def f(x, scale, offset):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return jnp.sum(jnp.tanh((x - mu) * lax.rsqrt(var + 1e-5) * scale + offset))

    return f, (normal(6, 32), 1 + normal(32, scale=0.1), normal(32, scale=0.1))


@program("batch_norm_train", "batch norm in training: batch statistics and the running-average update")
def _():
    def f(x, gamma, beta, mean, var):
        mu = jnp.mean(x, axis=(0, 1, 2))
        v = jnp.var(x, axis=(0, 1, 2))
        y = (x - mu) * lax.rsqrt(v + 1e-3) * gamma + beta
        return y, 0.99 * mean + 0.01 * mu, 0.99 * var + 0.01 * v

    return f, (normal(4, 6, 6, 8), 1 + normal(8, scale=0.1), normal(8, scale=0.1), np.zeros(8, np.float32), np.ones(8, np.float32))


@program("batch_norm_inference", "batch norm in inference: moving statistics")
def _():
    def f(x, gamma, beta, mean, var):
        return (x - mean) * lax.rsqrt(var + 1e-3) * gamma + beta

    return f, (normal(4, 6, 6, 8), 1 + normal(8, scale=0.1), normal(8, scale=0.1), normal(8, scale=0.1), uniform(8, lo=0.5, hi=2))


@program("gelu", "GELU, exact (erf) and tanh approximations", wrt=[0])
def _():
    def f(x):
        return jnp.sum(jax.nn.gelu(x, approximate=False) * 0.5 + jax.nn.gelu(x, approximate=True))

    return f, (normal(4, 64, scale=2.0),)


@program("causal_self_attention", "one head of causal self-attention with a softmax", wrt=[1, 2, 3])
def _():
    def f(x, wq, wk, wv):
        q, k, v = x @ wq, x @ wk, x @ wv
        s = q @ k.T / np.sqrt(16.0)
        mask = jnp.tril(jnp.ones((12, 12), bool))
        s = jnp.where(mask, s, -1e9)
        return jnp.sum(jax.nn.softmax(s, axis=-1) @ v)

    return f, (normal(12, 16), normal(16, 16, scale=0.3), normal(16, 16, scale=0.3), normal(16, 16, scale=0.3))


@program("embedding_lookup", "embedding lookup (gather) of s32 token ids")
def _():
    def f(table, ids):
        return jnp.take(table, ids, axis=0)

    return f, (normal(50, 8), RNG.integers(0, 50, size=(4, 6)).astype(np.int32))


@program("embedding_gradient", "the gradient of an embedding lookup (scatter-add)")
def _():
    def f(table, ids, target):
        return jax.grad(lambda t: jnp.sum((jnp.take(t, ids, axis=0) - target) ** 2))(table)

    return f, (normal(20, 8), RNG.integers(0, 20, size=(10,)).astype(np.int32), normal(10, 8))


@program("scan_rnn", "an Elman RNN over 6 steps with lax.scan", wrt=[0, 1])
def _():
    def f(wx, wh, xs):
        def cell(h, x):
            h = jnp.tanh(x @ wx + h @ wh)
            return h, h

        h, hs = lax.scan(cell, jnp.zeros((2, 8)), xs)
        return jnp.sum(hs) + jnp.sum(h)

    return f, (normal(4, 8, scale=0.4), normal(8, 8, scale=0.4), normal(6, 2, 4))


@program("scan_lstm", "an LSTM over 5 steps with lax.scan")
def _():
    def f(w, u, b, xs):
        def cell(carry, x):
            h, c = carry
            z = x @ w + h @ u + b
            i, fg, o, g = jnp.split(z, 4, axis=-1)
            c = jax.nn.sigmoid(fg) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        (h, c), hs = lax.scan(cell, (jnp.zeros((3, 6)), jnp.zeros((3, 6))), xs)
        return hs, c

    return f, (normal(4, 24, scale=0.4), normal(6, 24, scale=0.4), normal(24, scale=0.1), normal(5, 3, 4))


@program("cumsum", "cumulative sums along two axes (reduce-window)")
def _():
    def f(x):
        return jnp.cumsum(x, axis=1), jnp.cumsum(x, axis=0)

    return f, (normal(5, 7),)


@program("argmax_rows", "argmax over rows (a variadic reduce of values and s32 indices)")
def _():
    def f(x):
        return jnp.argmax(x, axis=-1).astype(jnp.int32), jnp.max(x, axis=-1)

    return f, (normal(6, 10),)


@program("top_k", "lax.top_k of each row")
def _():
    def f(x):
        v, i = lax.top_k(x, 3)
        return v, i

    return f, (normal(4, 9),)


# ---------------------------------------------------------------- convolutions and pooling
def conv(x, w, stride=(1, 1), padding="SAME", dilation=(1, 1), groups=1):
    return lax.conv_general_dilated(
        x, w, stride, padding, rhs_dilation=dilation,
        dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups,
    )


@program("conv_stride2", "3x3 convolution with stride 2, SAME padding", wrt=[0, 1], rtol=1e-3)
def _():
    return (lambda x, w: jnp.sum(jnp.tanh(conv(x, w, stride=(2, 2))))), (normal(2, 9, 9, 3), normal(3, 3, 3, 8, scale=0.3))


@program("conv_dilated", "3x3 convolution with dilation 2", wrt=[0, 1], rtol=1e-3)
def _():
    return (lambda x, w: jnp.sum(jnp.tanh(conv(x, w, dilation=(2, 2))))), (normal(2, 10, 10, 4), normal(3, 3, 4, 6, scale=0.3))


@program("conv_depthwise", "depthwise 3x3 convolution (feature_group_count = channels)", rtol=1e-3)
def _():
    return (lambda x, w: conv(x, w, groups=8)), (normal(2, 8, 8, 8), normal(3, 3, 1, 8, scale=0.3))


@program("conv_1x1", "1x1 convolution (a per-pixel matmul)", wrt=[0, 1], rtol=1e-3)
def _():
    return (lambda x, w: jnp.sum(jnp.tanh(conv(x, w)))), (normal(2, 6, 6, 16), normal(1, 1, 16, 8, scale=0.3))


@program("conv_valid", "5x5 convolution with VALID padding", rtol=1e-3)
def _():
    return (lambda x, w: conv(x, w, padding="VALID")), (normal(2, 12, 12, 3), normal(5, 5, 3, 4, scale=0.3))


@program("avg_pool", "2x2 average pooling (reduce-window add) and its gradient", wrt=[0])
def _():
    def f(x):
        s = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.sum(jnp.tanh(s / 4.0))

    return f, (normal(2, 8, 8, 3),)


# ---------------------------------------------------------------- collectives on a 2-D mesh
def mesh22():
    return Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("a", "b"))


def sharded(fn, in_specs, out_specs):
    return jax.shard_map(fn, mesh=mesh22(), in_specs=in_specs, out_specs=out_specs, check_vma=False)


@program("mesh2d_axis_index", "lax.axis_index over a 2x2 mesh (partition-id)", replicas=4)
def _():
    def body(x):
        ia = lax.axis_index("a").astype(jnp.float32)
        ib = lax.axis_index("b").astype(jnp.float32)
        return x * 0 + 10 * ia + ib

    return sharded(body, P("a", "b"), P("a", "b")), (normal(4, 4),)


@program("mesh2d_all_gather", "all_gather along one axis of a 2x2 mesh", replicas=4)
def _():
    def body(x):
        return lax.all_gather(x, "b", axis=1, tiled=True)

    return sharded(body, P("a", "b"), P("a", None)), (normal(4, 6),)


@program("mesh2d_psum_scatter", "psum_scatter along one axis of a 2x2 mesh", replicas=4)
def _():
    def body(x):
        return lax.psum_scatter(x, "a", scatter_dimension=0, tiled=True)

    return sharded(body, P(None, "b"), P("a", "b")), (normal(4, 6),)


@program("mesh2d_ppermute", "ppermute (a ring shift) along one axis of a 2x2 mesh", replicas=4)
def _():
    def body(x):
        return lax.ppermute(x, "b", perm=[(0, 1), (1, 0)])

    return sharded(body, P("a", "b"), P("a", "b")), (normal(4, 6),)


@program("mesh2d_pmax_pmean", "pmax over one axis and pmean over both of a 2x2 mesh", replicas=4)
def _():
    def body(x):
        return lax.pmax(x, "a") + lax.pmean(x, ("a", "b"))

    return sharded(body, P("a", "b"), P("a", "b")), (normal(4, 6),)


# ---------------------------------------------------------------- types
@program("bf16_f16_casts", "round trips through bf16 and f16 and arithmetic in them")
def _():
    def f(x):
        b = x.astype(jnp.bfloat16)
        h = x.astype(jnp.float16)
        return (b * b).astype(jnp.float32), (h + h).astype(jnp.float32), b.astype(jnp.float16).astype(jnp.float32)

    return f, (normal(4, 8, scale=3.0),)


@program("int_division_edges", "s32 div/rem by zero and INT_MIN / -1, as XLA defines them")
def _():
    def f(a, b):
        return lax.div(a, b), lax.rem(a, b)

    a = np.array([7, -7, 7, -7, 0, -2147483648, -2147483648, 5], np.int32)
    b = np.array([2, 2, 0, 0, 0, -1, 1, -3], np.int32)
    return f, (a, b)


@program("int_shift_edges", "shifts by 32 or more and by negative counts")
def _():
    def f(a, s):
        return lax.shift_left(a, s), lax.shift_right_arithmetic(a, s), lax.shift_right_logical(a, s)

    a = np.array([1, -1, 12345, -8, 7, 1 << 30], np.int32)
    s = np.array([0, 31, 32, 33, -1, 1], np.int32)
    return f, (a, s)


# ---------------------------------------------------------------- control flow
@program("cond", "lax.cond on a data-dependent predicate")
def _():
    def f(x):
        return lax.cond(jnp.sum(x) > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2, x)

    return f, (normal(5),)


@program("switch", "lax.switch over three branches from an s32 index")
def _():
    def f(i, x):
        return lax.switch(i, [lambda v: v + 1, lambda v: v * v, lambda v: -v], x)

    return f, (np.int32(1), normal(6))


@program("while_data_dependent", "a while loop that halves until the norm is below a bound")
def _():
    def f(x):
        def cond(c):
            v, n = c
            return (jnp.sum(v * v) > 1.0) & (n < 100)

        return lax.while_loop(cond, lambda c: (c[0] * 0.5, c[1] + 1), (x, jnp.int32(0)))

    return f, (normal(8, scale=10.0),)


# ---------------------------------------------------------------- memory ops
@program("dynamic_slice_update", "dynamic_slice and dynamic_update_slice at s32 offsets, clamped")
def _():
    def f(x, u, i, j):
        s = lax.dynamic_slice(x, (i, j), (3, 4))
        return s, lax.dynamic_update_slice(x, u, (j, i))

    return f, (normal(6, 8), normal(2, 3), np.int32(2), np.int32(7))


# ---------------------------------------------------------------- added later (appended so the
# earlier programs keep their random inputs)
@program("softmax_xent_int_labels", "softmax cross-entropy of s32 labels (one-hot by comparison)", wrt=[0])
def _():
    def f(logits, labels):
        onehot = (labels[:, None] == jnp.arange(10)[None, :]).astype(jnp.float32)
        return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits), axis=-1))

    return f, (normal(8, 10, scale=2.0), RNG.integers(0, 10, size=(8,)).astype(np.int32))


@program("dropout_threefry", "dropout with a raw uint32[2] key (threefry bits, bernoulli, select)")
def _():
    def f(key, x):
        keep = jax.random.bernoulli(key, 0.6, x.shape)
        return jnp.where(keep, x / 0.6, 0.0)

    return f, (np.array([0, 42], np.uint32), normal(4, 16))


@program("mesh2d_dropout_axis_index", "data-parallel dropout on a 2x2 mesh, the key folded with axis_index", replicas=4)
def _():
    def body(key, x):
        k = jax.random.fold_in(key, lax.axis_index("a") * 2 + lax.axis_index("b"))
        keep = jax.random.bernoulli(k, 0.5, x.shape)
        return jnp.where(keep, x * 2.0, 0.0)

    return sharded(body, (P(), P("a", "b")), P("a", "b")), (np.array([0, 7], np.uint32), normal(4, 8))


@program("cnn_max_pool_step", "a small CNN train step: conv 3x3, ReLU, 2x2 max-pool, dense, SGD", rtol=1e-3)
def _():
    def loss(p, x, y):
        h = jax.nn.relu(conv(x, p["k"]) + p["b"])
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        logits = h.reshape(h.shape[0], -1) @ p["w"]
        onehot = jax.nn.one_hot(y, 10)
        return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits), axis=-1))

    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), l

    p = {"k": normal(3, 3, 1, 4, scale=0.3), "b": np.zeros(4, np.float32), "w": normal(4 * 4 * 4, 10, scale=0.1)}
    return step, (p, normal(4, 8, 8, 1), RNG.integers(0, 10, size=(4,)).astype(np.int32))


@program("embedding_table_grad", "the gradient of a loss through an embedding lookup, duplicate ids", wrt=[0])
def _():
    def f(table, ids, w):
        return jnp.sum(jnp.tanh(jnp.take(table, ids, axis=0)) * w)

    return f, (normal(12, 4), np.array([[3, 7, 3], [0, 11, 3]], np.int32), normal(2, 3, 4))


@program("scatter_add_grads", "x.at[ids].add(u) with duplicate ids, gradients w.r.t. x and u", wrt=[0, 2])
def _():
    def f(x, ids, u):
        return jnp.sum(jnp.sin(x.at[ids].add(u)))

    return f, (normal(6, 3), np.array([4, 1, 4, 0], np.int32), normal(4, 3))


@program("take_along_axis", "jnp.take_along_axis on rows (gather with batching dims)", wrt=[0])
def _():
    def f(x, idx):
        return jnp.sum(jnp.take_along_axis(x, idx, axis=1) ** 2)

    return f, (normal(3, 5), RNG.integers(0, 5, size=(3, 4)).astype(np.int32))


@program("scatter_set_max_and_2d_gather", "x.at[].set, x.at[].max and x[rows, cols] (two index arrays)")
def _():
    def f(x, ids, u, rows, cols):
        return x.at[ids].set(u), x.at[ids].max(u), x[rows, cols]

    return f, (
        normal(5, 2),
        np.array([3, 0, 3], np.int32),
        normal(3, 2),
        np.array([4, 0, 2], np.int32),
        np.array([1, 0, 1], np.int32),
    )



@program(
    "cnn_two_conv_layers_step",
    "a VGG-style train step: two 3x3 conv layers (3 -> 8 -> 16 channels) each with bias, ReLU and 2x2 "
    "max-pool, then a 5x5 conv layer (16 -> 16), dense, SGD; the second and third layers' gradients are "
    "Winograd with factored transforms, run side by side",
    rtol=1e-3,
)
def _():
    def layer(h, k, b):
        h = jax.nn.relu(conv(h, k) + b)
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss(p, x, y):
        h = layer(x, p["k1"], p["b1"])
        h = layer(h, p["k2"], p["b2"])
        h = jax.nn.relu(conv(h, p["k3"]) + p["b3"])
        logits = h.reshape(h.shape[0], -1) @ p["w"]
        onehot = jax.nn.one_hot(y, 10)
        return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits), axis=-1))

    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree.map(lambda a, b: a - 0.05 * b, p, g), l

    p = {
        "k1": normal(3, 3, 3, 8, scale=0.3),
        "b1": normal(8, scale=0.1),
        "k2": normal(3, 3, 8, 16, scale=0.2),
        "b2": normal(16, scale=0.1),
        "k3": normal(5, 5, 16, 16, scale=0.1),
        "b3": np.zeros(16, np.float32),
        "w": normal(4 * 4 * 16, 10, scale=0.1),
    }
    return step, (p, normal(8, 16, 16, 3), RNG.integers(0, 10, size=(8,)).astype(np.int32))


@program(
    "erf_gelu_by_hand",
    "GELU written with lax.erf, as hand-written transformer code does (jax.nn.gelu expands erfc "
    "itself; lax.erf is the HLO `erf` op), in a small MLP, with its gradient",
    wrt=[0, 1],
)
def _():
    def gelu(h):
        return 0.5 * h * (1.0 + lax.erf(h / np.sqrt(2.0).astype(np.float32)))

    def f(w, x):
        return jnp.sum(gelu(x @ w) ** 2) + jnp.sum(lax.erf(x * 3.0))

    return f, (normal(16, 32, scale=0.5), normal(8, 16, scale=1.5))


@program(
    "sort_argsort_median",
    "jnp.sort with NaN and -0/+0 ties, a stable jnp.argsort along axis 0 with repeated keys, "
    "jnp.median, and lax.sort of two operands by the first (HLO `sort` with its comparator)",
)
def _():
    def f(x, k, v):
        keys = jnp.round(k * 2.0)  # repeated keys: the order of ties is tested
        both = lax.sort((keys[:, 0], v[:, 0]), num_keys=1)
        return (
            jnp.sort(x, axis=1),
            jnp.argsort(keys, axis=0, stable=True).astype(jnp.int32),
            jnp.median(x, axis=1),
            both[0],
            both[1],
        )

    x = normal(6, 9)
    x[0, 2] = np.nan
    x[1, 3] = -0.0
    x[1, 4] = 0.0
    x[2, :] = 1.5
    return f, (x, normal(7, 5), normal(7, 3))


def flat(tree):
    return [np.asarray(a) for a in jax.tree.leaves(tree)]


def write(name, what, replicas, rtol, wrt, build):
    fn, args = build()  # always built: the shared RNG must advance the same way
    only = os.environ.get("TESSEL_CORPUS_ONLY")
    if only and name not in only.split(","):
        return f"{name}\t{replicas}\t{rtol:g}\t{','.join(map(str, wrt or []))}\t{what}"
    jitted = jax.jit(fn)
    text = jitted.lower(*args).as_text(dialect="hlo", debug_info=True)
    with open(os.path.join(OUT, f"{name}.hlo"), "w") as f:
        f.write(text)
    save_file({str(i): a for i, a in enumerate(flat(args))}, os.path.join(OUT, f"{name}.inputs.safetensors"))
    save_file({str(i): a for i, a in enumerate(flat(jitted(*args)))}, os.path.join(OUT, f"{name}.outputs.safetensors"))
    if wrt:
        value, grads = jax.jit(jax.value_and_grad(fn, argnums=tuple(wrt)))(*args)
        out = [np.asarray(value)] + [np.asarray(g) for g in grads]
        save_file({str(i): a for i, a in enumerate(out)}, os.path.join(OUT, f"{name}.grad_outputs.safetensors"))
    return f"{name}\t{replicas}\t{rtol:g}\t{','.join(map(str, wrt or []))}\t{what}"


def main():
    rows = ["name\treplicas\trtol\tgrad_wrt\twhat"]
    for entry in PROGRAMS:
        rows.append(write(*entry))
        print(rows[-1].split("\t")[0])
    with open(os.path.join(OUT, "manifest.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"{len(PROGRAMS)} programs")


if __name__ == "__main__":
    main()
