"""TF's `TPUEstimator.predict` throughput on the MNIST test set: the reference for tessel's
`mnist --mode predict`.

Run in the TF 2.15 environment (/tmp/tf, see ../shared/peers/README.md); CI does not need it.

    python tests/tf/tf_predict_bench.py MODEL_DIR TRAIN.tfrecords TEST.tfrecords [batch] [repeats] [train_steps] [OUT.npz]

The guide's MNIST model_fn (`../shared/peers/tf_train_eval.py`, with a PREDICT branch: classes =
argmax, probabilities = softmax) through the real `TPUEstimator(use_tpu=False)`, on TFRecords
written by `tf_convert_to_records.py`. If MODEL_DIR has no checkpoint it first trains
`train_steps` steps (predict needs one). Then `repeats` times: `predict(input_fn)` over the
10,000 test images (`batch(B)` without drop_remainder: TF predicts the short last batch as is).

The rate excludes TF's graph build, session creation and restore: those happen before the
first example is yielded, so the clock starts at the first yield and the first batch's
examples are not counted: rate = (N - B) / (t_last - t_first). The wall rate (N / whole call)
is printed too. With OUT.npz the last run's `classes` and `probabilities` are saved, to compare
row by row with tessel's `--predictions-out` (e.g. after `--warm-start-from MODEL_DIR`).
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
tf.logging.set_verbosity(tf.logging.ERROR)
MD, TRAIN, TEST = sys.argv[1], sys.argv[2], sys.argv[3]
B = int(sys.argv[4]) if len(sys.argv) > 4 else 128
REPEATS = int(sys.argv[5]) if len(sys.argv) > 5 else 3
STEPS = int(sys.argv[6]) if len(sys.argv) > 6 else 100
OUT = sys.argv[7] if len(sys.argv) > 7 else None


def model_fn(features, labels, mode, params):
    x = tf.reshape(features, [-1, 28, 28, 1])
    x = tf.layers.conv2d(x, 32, [5, 5], padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, [2, 2], 2)
    x = tf.layers.conv2d(x, 64, [5, 5], padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, [2, 2], 2)
    x = tf.layers.dense(tf.reshape(x, [-1, 7 * 7 * 64]), 128, activation=tf.nn.relu)
    x = tf.layers.dropout(x, rate=0.4, training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = tf.layers.dense(x, 10)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {"classes": tf.argmax(logits, 1, output_type=tf.int32),
                       "probabilities": tf.nn.softmax(logits)}
        return tf.estimator.tpu.TPUEstimatorSpec(mode=mode, predictions=predictions)
    loss = tf.losses.softmax_cross_entropy(onehot_labels=tf.one_hot(tf.cast(labels, tf.int32), 10), logits=logits)
    lr = tf.train.exponential_decay(0.05, tf.train.get_global_step(), 100000, 0.96)
    train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def parser(s):
    f = tf.parse_single_example(s, {"image_raw": tf.FixedLenFeature([], tf.string),
                                    "label": tf.FixedLenFeature([], tf.int64)})
    img = tf.cast(tf.decode_raw(f["image_raw"], tf.uint8), tf.float32) * (1. / 255) - 0.5
    img.set_shape([784])
    return img, tf.cast(f["label"], tf.int32)


def train_input_fn(params):
    ds = tf.data.TFRecordDataset(TRAIN, buffer_size=8 << 20).map(parser).cache().repeat()
    return ds.batch(params["batch_size"], drop_remainder=True).prefetch(4)


def predict_input_fn(params):
    ds = tf.data.TFRecordDataset(TEST, buffer_size=8 << 20).map(lambda s: parser(s)[0]).cache()
    return ds.batch(params["batch_size"]).prefetch(4)


cfg = tf.estimator.tpu.RunConfig(model_dir=MD, save_checkpoints_steps=10**9,
                                 tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=50))
est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, use_tpu=False, train_batch_size=B,
                                    predict_batch_size=B, config=cfg)
if tf.train.latest_checkpoint(MD) is None:
    est.train(train_input_fn, max_steps=STEPS)
labels = np.array([int(tf.train.Example.FromString(r).features.feature["label"].int64_list.value[0])
                   for r in tf.python_io.tf_record_iterator(TEST)])
for _ in range(REPEATS):
    t0 = time.perf_counter()
    first = None
    classes, probabilities = [], []
    for p in est.predict(predict_input_fn):
        if first is None:
            first = time.perf_counter()
        classes.append(p["classes"])
        probabilities.append(p["probabilities"])
    t1 = time.perf_counter()
    n = len(classes)
    acc = float(np.mean(np.array(classes) == labels[:n]))
    print(f"tf predict examples={n} accuracy={acc:.4f} setup_s={first - t0:.2f} "
          f"examples_per_sec={(n - B) / (t1 - first):.0f} wall_examples_per_sec={n / (t1 - t0):.0f}",
          flush=True)
if OUT:
    np.savez(OUT, classes=np.array(classes, np.int32), probabilities=np.array(probabilities, np.float32))
