"""Prints tf.data's interleave order for the cases estimator/tests/dataset.rs checks
(`interleave_follows_tf_data_order`): input i holds i*10 + 0..len[i].

usage: /tmp/tf/bin/python tests/tf/interleave_order.py   (not run by CI; needs TensorFlow)
Expected (TF 2.15):
  [0, 1, 10, 11, 2, 3, 20, 21, 22, 23, 24]
  [0, 1, 10, 20, 21, 2, 22, 23, 40, 41, 24, 25]
"""
import tensorflow as tf


def order(lens, cycle_length, block_length):
    lens = tf.constant(lens, tf.int64)
    ds = tf.data.Dataset.range(len(lens)).interleave(
        lambda i: tf.data.Dataset.range(10).map(lambda j: i * 10 + j).take(tf.gather(lens, i)),
        cycle_length=cycle_length,
        block_length=block_length,
    )
    return [int(x) for x in ds.as_numpy_iterator()]


print(order([4, 2, 5], 2, 2))
print(order([3, 1, 6, 0, 2], 3, 2))
