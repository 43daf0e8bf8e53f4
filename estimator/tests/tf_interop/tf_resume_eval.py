"""TF's TPUEstimator resumes from a tessel model_dir: the round trip's TensorFlow half.

usage: python tf_resume_eval.py MODEL_DIR train.tfrecords test.tfrecords STEPS [batch] [iterations] [lr]

MODEL_DIR holds tessel's MNIST example trained with `--checkpoint-format tf` (or `both`). With
the same model_fn as the example (the TPUEstimator guide's MNIST CNN; a copy of
/work/shared/peers/tf_train_eval.py's), TF first evaluates the checkpoint tessel wrote (a
restore: no training), then trains on to STEPS from tessel's global step and evaluates again,
leaving TF's own checkpoint in MODEL_DIR for tessel to warm-start from. Evaluation runs
10000 // batch full batches, as the guide does. Prints one line per evaluation. Needs
TensorFlow 2.15 with tensorflow-estimator.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
MD, TRAIN, TEST, STEPS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
B = int(sys.argv[5]) if len(sys.argv) > 5 else 128
ITERS = int(sys.argv[6]) if len(sys.argv) > 6 else 50
LR = float(sys.argv[7]) if len(sys.argv) > 7 else 0.05


def model_fn(features, labels, mode, params):
    x = tf.reshape(features, [-1, 28, 28, 1])
    x = tf.layers.conv2d(x, 32, [5, 5], padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, [2, 2], 2)
    x = tf.layers.conv2d(x, 64, [5, 5], padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, [2, 2], 2)
    x = tf.layers.dense(tf.reshape(x, [-1, 7 * 7 * 64]), 128, activation=tf.nn.relu)
    x = tf.layers.dropout(x, rate=0.4, training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = tf.layers.dense(x, 10)
    loss = tf.losses.softmax_cross_entropy(onehot_labels=tf.one_hot(tf.cast(labels, tf.int32), 10), logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        def metric_fn(labels, logits):
            return {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}
        return tf.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
    lr = tf.train.exponential_decay(LR, tf.train.get_global_step(), 100000, 0.96)
    train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def make_input_fn(path, repeat):
    def input_fn(params):
        def parser(s):
            f = tf.parse_single_example(s, {"image_raw": tf.FixedLenFeature([], tf.string), "label": tf.FixedLenFeature([], tf.int64)})
            img = tf.cast(tf.decode_raw(f["image_raw"], tf.uint8), tf.float32) * (1. / 255) - 0.5
            img.set_shape([784])
            return img, tf.cast(f["label"], tf.int32)
        ds = tf.data.TFRecordDataset(path, buffer_size=8 << 20).map(parser).cache()
        if repeat:
            ds = ds.repeat()
        return ds.batch(params["batch_size"], drop_remainder=True).prefetch(4)
    return input_fn


def evaluate(est, what):
    r = est.evaluate(make_input_fn(TEST, False), steps=10000 // B)
    print(f"tf {what}: global_step={r['global_step']} accuracy={r['accuracy']:.4f} loss={r['loss']:.4f}")


if tf.train.latest_checkpoint(MD) is None:
    sys.exit(f"FAIL: TF finds no checkpoint in {MD}")
cfg = tf.estimator.tpu.RunConfig(model_dir=MD, save_checkpoints_steps=10**9, save_summary_steps=100,
                                 tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=ITERS))
est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, use_tpu=False, train_batch_size=B, eval_batch_size=B, config=cfg)
evaluate(est, f"evaluates tessel's {tf.train.latest_checkpoint(MD)}")
est.train(make_input_fn(TRAIN, True), max_steps=STEPS)
evaluate(est, f"after resuming training to step {STEPS}")
print(f"tf model_dir={MD} latest={tf.train.latest_checkpoint(MD)}")
