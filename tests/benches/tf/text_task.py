"""Writes the text CNN's accuracy task as IDX files, for both sides of the model suite's
accuracy runs (tests/benches/models_accuracy.sh): tessel's `models_bench --accuracy` and
models.py --accuracy read the same files.

    python tests/benches/tf/text_task.py DIR [--seed 0]

The task: sequences of 200 token ids in [0, 20000). Each class c in 0..10 owns 40 keyword
ids, 100 + 40c .. 100 + 40c + 39; ids below 500 appear only as keywords. A sequence holds
one keyword of its class at a random position and 199 filler ids uniform in [500, 20000).
One label in ten is replaced by a uniformly random class, so no model exceeds about 0.91.
A width-5 convolution with a global max pool learns it, as a keyword spotter.

Files (IDX, big-endian int32, type 0x0C): train-ids-idx2-int [20000, 200],
train-labels-idx1-int [20000], t10k-ids-idx2-int [5000, 200], t10k-labels-idx1-int [5000].
Needs numpy only.
"""
import argparse
import os
import struct
import sys

import numpy as np

VOCAB, LENGTH, CLASSES = 20000, 200, 10
KEYWORDS, FIRST_KEYWORD, FIRST_FILLER = 40, 100, 500
NOISE = 0.1


def write_idx(path, array):
    array = np.ascontiguousarray(array, dtype=">i4")
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x0C, array.ndim]))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.tobytes())


def make(rng, n):
    ids = rng.integers(FIRST_FILLER, VOCAB, (n, LENGTH))
    classes = rng.integers(0, CLASSES, n)
    keyword = FIRST_KEYWORD + KEYWORDS * classes + rng.integers(0, KEYWORDS, n)
    ids[np.arange(n), rng.integers(0, LENGTH, n)] = keyword
    labels = np.where(rng.random(n) < NOISE, rng.integers(0, CLASSES, n), classes)
    return ids, labels


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for split, n in (("train", 20000), ("t10k", 5000)):
        ids, labels = make(rng, n)
        write_idx(os.path.join(args.dir, f"{split}-ids-idx2-int"), ids)
        write_idx(os.path.join(args.dir, f"{split}-labels-idx1-int"), labels)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
