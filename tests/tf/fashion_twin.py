"""The TF 2.15 twin of estimator/examples/fashion_mnist.rs: the same model in tf.compat.v1
(3x3 same convolutions without bias, batch normalization, max pooling, dense 256, dropout 0.3,
dense 10; Adam with cosine decay), trained from Fashion-MNIST's IDX files, saved as a TF
checkpoint (model_dir with a `checkpoint` state file), and evaluated on the whole test set.

Run: /tmp/tf/bin/python tests/tf/fashion_twin.py DATA_DIR MODEL_DIR STEPS
then: cargo run --release --example fashion_mnist -- --data-dir DATA_DIR --mode evaluate \
          --warm-start-from MODEL_DIR --model-dir EMPTY_DIR
which restores every variable (the moving statistics too) and reports TF's accuracy and step.
"""
import gzip
import os
import struct
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.disable_eager_execution()
data_dir, model_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])


def idx(name):
    raw = gzip.open(os.path.join(data_dir, name + ".gz")).read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw[4 + 4 * ndim:], np.uint8).reshape(dims)


train_x = idx("train-images-idx3-ubyte").astype(np.float32)[..., None] / 255.0
train_y = idx("train-labels-idx1-ubyte").astype(np.int32)
test_x = idx("t10k-images-idx3-ubyte").astype(np.float32)[..., None] / 255.0
test_y = idx("t10k-labels-idx1-ubyte").astype(np.int32)

x = v1.placeholder(tf.float32, [None, 28, 28, 1])
y = v1.placeholder(tf.int32, [None])
training = v1.placeholder(tf.bool, [])
h = x
for filters in (32, 64):
    h = v1.layers.conv2d(h, filters, 3, padding="same", use_bias=False)
    h = tf.nn.relu(v1.layers.batch_normalization(h, training=training))
    h = v1.layers.max_pooling2d(h, 2, 2)
h = v1.layers.flatten(h)
h = v1.layers.dense(h, 256, activation=tf.nn.relu)
h = v1.layers.dropout(h, 0.3, training=training)
logits = v1.layers.dense(h, 10)
loss = v1.losses.sparse_softmax_cross_entropy(y, logits)
step = v1.train.get_or_create_global_step()
lr = v1.train.cosine_decay(0.001, step, steps)
with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
    train_op = v1.train.AdamOptimizer(lr).minimize(loss, global_step=step)
correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), y), tf.float32))

rng = np.random.default_rng(7)
with v1.Session() as s:
    s.run(v1.global_variables_initializer())
    for i in range(steps):
        b = rng.integers(0, len(train_y), 64)
        s.run(train_op, {x: train_x[b], y: train_y[b], training: True})
    right = sum(s.run(correct, {x: test_x[i:i + 500], y: test_y[i:i + 500], training: False})
                for i in range(0, len(test_y), 500))
    os.makedirs(model_dir, exist_ok=True)
    v1.train.Saver().save(s, os.path.join(model_dir, "model.ckpt"), global_step=step)
    print(f"tf global_step={s.run(step)} accuracy={right / len(test_y):.4f}")
