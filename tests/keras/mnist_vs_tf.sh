#!/usr/bin/env bash
# The forum question's Keras model on MNIST, trained by TF's model_to_estimator and by
# `tessel keras train --num-shards 2` for the same steps, alternately ROUNDS times; prints
# each side's train time and test accuracy, and the CPU.
#   bash tests/keras/mnist_vs_tf.sh [STEPS] [ROUNDS]      (needs /tmp/tf: tests/keras/README.md)
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-2000}
rounds=${2:-1}
batch=128
py=${TF_PYTHON:-/tmp/tf/bin/python}
idx=${MNIST_IDX:-../shared/data/mnist}
out=${OUT:-/tmp/keras_mnist_vs_tf}
grep -m2 -E 'cpu family|model\s' /proc/cpuinfo
cargo build -q --release -p tessel
[ -f "$out/train.npz" ] || "$py" tests/keras/mnist_vs_tf.py prepare "$idx" "$out" 2>/dev/null
for round in $(seq "$rounds"); do
  rm -rf "$out/tessel_model_dir" "$out/tf_model_dir"
  start=$(date +%s.%N)
  ./target/release/tessel keras train "$out/model.keras" --data "$out/train.npz" \
    --batch-size "$batch" --steps "$steps" --num-shards 2 --model-dir "$out/tessel_model_dir" \
    >/dev/null 2>&1
  train_s=$(awk "BEGIN {print $(date +%s.%N) - $start}")
  acc=$(./target/release/tessel keras evaluate "$out/model.keras" --data "$out/test.npz" \
    --model-dir "$out/tessel_model_dir" 2>/dev/null | awk '$1 == "accuracy" {print $3}')
  printf 'tessel steps %s batch %s shards 2 train_s %.1f accuracy %s\n' "$steps" "$batch" "$train_s" "$acc"
  "$py" tests/keras/mnist_vs_tf.py tf "$out" "$steps" "$batch" 2>/dev/null
done
