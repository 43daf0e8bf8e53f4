"""tf.data doing the work of estimator/benches/dataset.rs, for comparison in the same sitting.

The guide's MNIST input pipeline on MNIST-sized synthetic data: from_tensor_slices of 60000 u8
[28, 28] images and int32 labels -> map(cast to f32, / 255 - 0.5) -> cache -> repeat ->
batch(128, drop_remainder=True) -> prefetch(4). Prints examples/s and µs per batch for the
first epoch and the cached epochs, with tf.data's threads limited to 1 and to 2.

usage: /tmp/tf/bin/python tests/tf/dataset_bench.py   (not run by CI; needs TensorFlow)
"""
import time

import numpy as np
import tensorflow as tf

N, BATCH = 60000, 128
PER_EPOCH = N // BATCH


def pipeline(images, labels, threads):
    def normalize(image, label):
        return tf.cast(image, tf.float32) / 255.0 - 0.5, label

    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    ds = ds.map(normalize).cache().repeat()
    ds = ds.batch(BATCH, drop_remainder=True).prefetch(4)
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = threads
    opts.threading.max_intra_op_parallelism = 1
    return ds.with_options(opts)


def report(what, batches, secs):
    print(f"  {what:<44} {batches * BATCH / secs:>9.0f} examples/s  {secs * 1e6 / batches:>7.1f} µs/batch")


def main():
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(N, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=(N,), dtype=np.int32)
    for threads in (1, 2):
        print(f"tf.data, {threads} thread(s):")
        it = iter(pipeline(images, labels, threads))
        t = time.perf_counter()
        for _ in range(PER_EPOCH):
            next(it)
        report("first epoch (map, fill cache)", PER_EPOCH, time.perf_counter() - t)
        steady = 3 * PER_EPOCH
        t = time.perf_counter()
        for _ in range(steady):
            next(it)
        report("cached epochs (batch from cache)", steady, time.perf_counter() - t)


if __name__ == "__main__":
    main()
