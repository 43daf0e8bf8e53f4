"""Prints TF 2.15's tf.compat.v1.losses values for the inputs of estimator/tests/losses.rs.

Run: /tmp/tf/bin/python tests/tf/check_losses.py  (the Rust test holds the printed values)
"""
import json

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
R = v1.losses.Reduction
REDUCTIONS = {
    "none": R.NONE,
    "sum": R.SUM,
    "mean": R.MEAN,
    "sum_over_batch_size": R.SUM_OVER_BATCH_SIZE,
    "sum_by_nonzero_weights": R.SUM_BY_NONZERO_WEIGHTS,
}

logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0], [2.5, 0.25, -0.5], [-1.5, 1.0, 0.0]], np.float32)
sparse = np.array([1, 2, 0, 0], np.int32)
onehot = np.eye(3, dtype=np.float32)[sparse]
multi = np.array([[0, 1, 0], [1, 0, 1], [0, 0, 1], [1, 1, 0]], np.float32)
w_rows = np.array([1.0, 0.0, 2.0, 0.5], np.float32)
w_col = w_rows.reshape(4, 1)
pred = np.array([[0.5, 2.0], [1.5, -1.0], [3.0, 0.0], [-2.0, 0.25]], np.float32)
lab = np.array([[1.0, 0.0], [1.0, -0.5], [0.0, 0.0], [0.0, 2.0]], np.float32)

cases = {
    "softmax": lambda w, r: v1.losses.softmax_cross_entropy(onehot, logits, weights=w, reduction=r),
    "softmax_smooth": lambda w, r: v1.losses.softmax_cross_entropy(
        onehot, logits, weights=w, label_smoothing=0.1, reduction=r),
    "sparse": lambda w, r: v1.losses.sparse_softmax_cross_entropy(sparse, logits, weights=w, reduction=r),
    "sigmoid": lambda w, r: v1.losses.sigmoid_cross_entropy(multi, logits, weights=w, reduction=r),
    "sigmoid_smooth": lambda w, r: v1.losses.sigmoid_cross_entropy(
        multi, logits, weights=w, label_smoothing=0.2, reduction=r),
    "mse": lambda w, r: v1.losses.mean_squared_error(lab, pred, weights=w, reduction=r),
    "absolute": lambda w, r: v1.losses.absolute_difference(lab, pred, weights=w, reduction=r),
    "huber": lambda w, r: v1.losses.huber_loss(lab, pred, weights=w, reduction=r),
    "huber_half": lambda w, r: v1.losses.huber_loss(lab, pred, weights=w, delta=0.5, reduction=r),
}
# Per-example weights: [4] for the per-example losses, [4, 1] for the elementwise ones.
per_example = {"softmax", "softmax_smooth", "sparse"}
out = {}
for name, f in cases.items():
    w = w_rows if name in per_example else w_col
    for rname, r in REDUCTIONS.items():
        out[f"{name}/{rname}"] = np.asarray(f(w, r)).ravel().tolist()
    out[f"{name}/default_unweighted"] = np.asarray(f(1.0, R.SUM_BY_NONZERO_WEIGHTS)).ravel().tolist()
print(json.dumps(out, indent=1))
