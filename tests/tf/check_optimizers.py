"""Checks the formulas tessel's optimizer and schedule tests assert against TF itself.

The Rust tests (estimator/tests/optimizers.rs, schedules.rs) compare tessel's traced updates
with TF1's update formulas written out in f64. This script runs TF 2.x's tf.compat.v1
optimizers and schedules on the same linear model and steps and compares them with the same
formulas (numpy, f64), and checks TF's slot variable names against the ones tessel gives.
So: tessel == formula (cargo test) and formula == TF (this script).

Run by hand (CI has no TF):  /tmp/tf/bin/python tests/tf/check_optimizers.py
"""
import math
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()

X = np.array([[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [-2.0, 0.25, 1.0], [1.5, 1.0, 0.5]])
Y = np.array([1.0, -2.0, 0.5, 3.0])
W0 = np.array([0.5, -1.0, 2.0])
B0 = 0.3
F = lambda v: float(np.float32(v))  # a constant as tessel's f32 sees it

failures = []


def check(label, got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))
    status = "ok" if err <= tol else "FAIL"
    if err > tol:
        failures.append(label)
    print(f"{status:4} {label}: max rel err {err:.2e}")


def gradient(p):
    r = X @ p[:3] + p[3] - Y
    return np.concatenate([2 * X.T @ r / len(Y), [2 * r.sum() / len(Y)]])


def reference(update, steps=3):
    p = np.array([*W0, B0])
    out = []
    for t in range(1, steps + 1):
        update(p, gradient(p), t)
        out.append(p.copy())
    return out


def run_tf(make_opt, steps=3):
    g = tf1.Graph()
    with g.as_default():
        w = tf1.get_variable("w", initializer=W0.reshape(3, 1).astype(np.float32))
        b = tf1.get_variable("b", initializer=np.array([B0], np.float32))
        step = tf1.train.get_or_create_global_step()
        r = tf.matmul(X.astype(np.float32), w) + b - Y.reshape(4, 1).astype(np.float32)
        loss = tf.reduce_mean(r * r)
        train = make_opt().minimize(loss, global_step=step)
        names = [v.op.name for v in tf1.global_variables() if v.op.name != "global_step"]
        with tf1.Session() as s:
            s.run(tf1.global_variables_initializer())
            out = []
            for _ in range(steps):
                s.run(train)
                wv, bv = s.run([w, b])
                out.append(np.concatenate([wv.ravel(), bv]))
            return out, names


def momentum_ref(lr, m, nesterov):
    acc = np.zeros(4)

    def update(p, g, _):
        acc[:] = F(m) * acc + g
        p -= lr * g + lr * F(m) * acc if nesterov else lr * acc
    return update


def adam_ref(lr, b1=F(0.9), b2=F(0.999), eps=1e-8):
    m, v = np.zeros(4), np.zeros(4)

    def update(p, g, t):
        lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        m[:] += (g - m) * (1 - b1)
        v[:] += (g * g - v) * (1 - b2)
        p -= lr_t * m / (np.sqrt(v) + eps)
    return update


def rmsprop_ref(lr, mom, centered, decay=F(0.9), eps=1e-10):
    ms, mg, mo = np.ones(4), np.zeros(4), np.zeros(4)

    def update(p, g, _):
        ms[:] += (g * g - ms) * (1 - decay)
        if centered:
            mg[:] += (g - mg) * (1 - decay)
        mo[:] = mom * mo + lr * g / np.sqrt(ms - (mg * mg if centered else 0) + eps)
        p -= mo
    return update


def adagrad_ref(lr):
    acc = np.full(4, F(0.1))

    def update(p, g, _):
        acc[:] += g * g
        p -= lr * g / np.sqrt(acc)
    return update


def gd_ref(lr):
    def update(p, g, _):
        p -= lr * g
    return update


CASES = [
    ("GradientDescent", lambda: tf1.train.GradientDescentOptimizer(0.1), gd_ref(0.1),
     ["w", "b"]),
    ("Momentum", lambda: tf1.train.MomentumOptimizer(0.05, 0.9), momentum_ref(0.05, 0.9, False),
     ["w", "b", "w/Momentum", "b/Momentum"]),
    ("Nesterov", lambda: tf1.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
     momentum_ref(0.05, 0.9, True), ["w", "b", "w/Momentum", "b/Momentum"]),
    ("Adam", lambda: tf1.train.AdamOptimizer(0.01), adam_ref(0.01),
     ["w", "b", "beta1_power", "beta2_power", "w/Adam", "w/Adam_1", "b/Adam", "b/Adam_1"]),
    ("RMSProp", lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.5),
     rmsprop_ref(0.01, 0.5, False),
     ["w", "b", "w/RMSProp", "w/RMSProp_1", "b/RMSProp", "b/RMSProp_1"]),
    ("RMSProp centered", lambda: tf1.train.RMSPropOptimizer(0.01, centered=True),
     rmsprop_ref(0.01, 0.0, True),
     ["w", "b", "w/RMSProp", "w/RMSProp_1", "w/RMSProp_2", "b/RMSProp", "b/RMSProp_1",
      "b/RMSProp_2"]),
    ("Adagrad", lambda: tf1.train.AdagradOptimizer(0.1), adagrad_ref(0.1),
     ["w", "b", "w/Adagrad", "b/Adagrad"]),
]

for label, make, ref, names in CASES:
    got, tf_names = run_tf(make)
    for t, (a, b) in enumerate(zip(got, reference(ref))):
        check(f"{label} step {t + 1}", a, b, 2e-5)
    # tessel creates variables in TF's order; TF lists them by creation too.
    if tf_names != names:
        failures.append(f"{label} names")
        print(f"FAIL {label} names: TF {tf_names}, tessel {names}")
    else:
        print(f"ok   {label} names {names}")

# Schedules at the steps of estimator/tests/schedules.rs.
STEPS = [0, 1, 2, 99, 100, 101, 150, 199, 200, 201, 999, 1000, 1001, 5000, 123456, 2**31 - 1]
g = tf1.Graph()
with g.as_default():
    s = tf1.placeholder(tf.int32, [])
    rates = [
        tf1.train.exponential_decay(0.1, s, 100, 0.96, staircase=False),
        tf1.train.exponential_decay(0.1, s, 100, 0.5, staircase=True),
        tf1.train.piecewise_constant(s, [100, 200, 1000], [1.0, 0.5, 0.25, 0.125]),
        tf1.train.polynomial_decay(0.1, s, 1000, 0.001, power=2.0, cycle=False),
        tf1.train.polynomial_decay(0.1, s, 100, 0.01, power=1.0, cycle=True),
        tf1.train.cosine_decay(0.1, s, 1000, alpha=0.1),
    ]
    with tf1.Session() as sess:
        for step in STEPS:
            got = sess.run(rates, {s: step})
            sf = float(np.float32(step))
            div = lambda a, b: float(np.float32(a) / np.float32(b))
            held = min(sf, 1000.0)
            cyc = 100.0 * (1.0 if sf == 0 else math.ceil(div(sf, 100.0)))
            pw = 1.0 if step <= 100 else 0.5 if step <= 200 else 0.25 if step <= 1000 else 0.125
            want = [
                0.1 * F(0.96) ** div(sf, 100.0),
                0.1 * 0.5 ** math.floor(div(sf, 100.0)),
                pw,
                (0.1 - 0.001) * (1 - held / 1000) ** 2 + 0.001,
                (0.1 - 0.01) * (1 - div(sf, cyc)) + 0.01,
                0.1 * ((1 - F(0.1)) * 0.5 * (1 + math.cos(math.pi * held / 1000)) + F(0.1)),
            ]
            check(f"schedules at step {step}", got, want, 2e-6)

print("all match" if not failures else f"{len(failures)} failures: {failures}")
sys.exit(1 if failures else 0)
