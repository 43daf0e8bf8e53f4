"""Writes estimator/tests/fixtures/tf_bn_ckpt/: a TF 2.15 checkpoint of a batch-norm model
(tf.compat.v1.layers.batch_normalization on 4 features, then tf.layers.dense 4 -> 3) with
moving statistics far from their initial values and global_step 42, as a TPUEstimator
model_dir holds it. estimator/tests/restore_or_warm_start.rs holds the same values.

Run: /tmp/tf/bin/python tests/tf/make_tf_bn_ckpt_fixture.py
"""
import os

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.disable_eager_execution()
out = os.path.join(os.path.dirname(__file__), "..", "..", "estimator", "tests", "fixtures", "tf_bn_ckpt")
os.makedirs(out, exist_ok=True)

VALUES = {
    "batch_normalization/gamma": np.array([1.5, 0.5, 2.0, 1.0], np.float32),
    "batch_normalization/beta": np.array([0.1, -0.2, 0.3, 0.0], np.float32),
    "batch_normalization/moving_mean": np.array([0.5, -1.0, 2.0, 0.25], np.float32),
    "batch_normalization/moving_variance": np.array([4.0, 0.25, 1.0, 9.0], np.float32),
    "dense/kernel": np.array([[0.5, -0.25, 1.0], [0.0, 0.75, -0.5], [1.25, 0.5, 0.0],
                              [-1.0, 0.25, 0.5]], np.float32),
    "dense/bias": np.array([0.1, 0.0, -0.1], np.float32),
}

with tf.Graph().as_default():
    x = v1.placeholder(tf.float32, [None, 4])
    h = v1.layers.batch_normalization(x, training=False)
    logits = v1.layers.dense(h, 3)
    step = v1.train.get_or_create_global_step()
    assigns = [v1.assign(v, VALUES[v.op.name]) for v in v1.global_variables() if v.op.name in VALUES]
    assert len(assigns) == len(VALUES), [v.op.name for v in v1.global_variables()]
    assigns.append(v1.assign(step, 42))
    with v1.Session() as s:
        s.run(v1.global_variables_initializer())
        s.run(assigns)
        v1.train.Saver().save(s, os.path.join(out, "model.ckpt"), global_step=42,
                              write_meta_graph=False)
        probe = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
        print("logits of [1, 2, 3, 4]:", s.run(logits, {x: probe}).tolist())
# The state file as TF writes it for a relative model_dir, so the fixture moves with the clone.
with open(os.path.join(out, "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "model.ckpt-42"\nall_model_checkpoint_paths: "model.ckpt-42"\n')
