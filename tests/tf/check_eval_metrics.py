"""TF reference for tessel's AUC and top-k accuracy (estimator/tests/evaluate_whole.rs).

Run by hand: /tmp/tf/bin/python tests/tf/check_eval_metrics.py
It prints TF1's tf.compat.v1.metrics.auc (200 and 7 thresholds, weighted, streamed over two
batches) and mean(in_top_k) on data both sides generate from the same formula; the Rust test
`auc_and_top_k_match_tf` holds the printed values.
"""
import math

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

N = 1000
i = np.arange(N)
# The same formula as the Rust test: frac(|sin(i)| * 43758.5453) as f32.
pred = np.array([math.modf(abs(math.sin(k)) * 43758.5453)[0] for k in range(N)], dtype=np.float32)
labels = np.array([1.0 if (k * 7 % 3 == 0) != (pred[k] < 0.3) else 0.0 for k in range(N)], dtype=np.float32)
weights = np.array([0.0 if k % 10 == 9 else 1.0 for k in range(N)], dtype=np.float32)
scores = np.array([[math.modf(abs(math.sin(k * 5 + c)) * 9973.1)[0] for c in range(5)] for k in range(N)], dtype=np.float32)
classes = np.array([k % 5 for k in range(N)], dtype=np.int32)

lab = tf.compat.v1.placeholder(tf.float32, [None])
p = tf.compat.v1.placeholder(tf.float32, [None])
w = tf.compat.v1.placeholder(tf.float32, [None])
auc200, up200 = tf.compat.v1.metrics.auc(lab, p, weights=w, num_thresholds=200)
auc7, up7 = tf.compat.v1.metrics.auc(lab, p, weights=w, num_thresholds=7)
sc = tf.compat.v1.placeholder(tf.float32, [None, 5])
cl = tf.compat.v1.placeholder(tf.int32, [None])
top2, uptop2 = tf.compat.v1.metrics.mean(tf.cast(tf.compat.v1.nn.in_top_k(sc, cl, 2), tf.float32), weights=w)
with tf.compat.v1.Session() as s:
    s.run(tf.compat.v1.local_variables_initializer())
    for lo, hi in [(0, 600), (600, N)]:
        s.run([up200, up7, uptop2], {lab: labels[lo:hi], p: pred[lo:hi], w: weights[lo:hi], sc: scores[lo:hi], cl: classes[lo:hi]})
    a200, a7, t2 = s.run([auc200, auc7, top2])
print(f"auc200={a200:.9f} auc7={a7:.9f} top2={t2:.9f}")
