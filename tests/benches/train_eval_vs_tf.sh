#!/usr/bin/env bash
# The MNIST recipe of TPUEstimator's guide end to end (2000 steps at batch 128, lr 0.05, 50 iterations per loop, then
# evaluation on the test set) on tessel's estimator and on TF's TPUEstimator, both reading the
# same TFRecords written by TF's convert_to_records.py, alternating in one sitting.
#
#   bash tests/benches/train_eval_vs_tf.sh [ROUNDS] [STEPS]
#
# Needs `cargo build --release -p tessel-estimator --example mnist` and TF 2.15 in /tmp/tf
# (../shared/peers/README.md). Prints each run's wall times, accuracy and peak RSS.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-2}
STEPS=${2:-2000}
PEERS=../shared/peers
EX=./target/release/examples/mnist
DATA=/tmp/train_eval_vs_tf
[ -x "$EX" ] || { echo "build first: cargo build --release -p tessel-estimator --example mnist" >&2; exit 2; }
[ -x /tmp/tf/bin/python ] || { echo "set up TensorFlow as in $PEERS/README.md (/tmp/tf)" >&2; exit 2; }
mkdir -p $DATA
[ -f $DATA/train.tfrecords ] || /tmp/tf/bin/python $PEERS/tf_convert_to_records.py ../shared/data/mnist $DATA >/dev/null
. tests/benches/common.sh
print_cpu
for r in $(seq "$ROUNDS"); do
    rm -rf $DATA/md_tessel $DATA/md_tf
    /usr/bin/time -f "%M" -o $DATA/rss $EX --model-dir $DATA/md_tessel \
        --train-file $DATA/train.tfrecords --eval-file $DATA/test.tfrecords \
        --train-steps "$STEPS" 2>/dev/null
    echo "tessel peak_rss_kb=$(cat $DATA/rss)"
    /usr/bin/time -f "%M" -o $DATA/rss /tmp/tf/bin/python $PEERS/tf_train_eval.py $DATA/md_tf \
        $DATA/train.tfrecords $DATA/test.tfrecords "$STEPS" 2>/dev/null | grep "^tf "
    echo "tf peak_rss_kb=$(cat $DATA/rss)"
    echo "round $r (load $(cut -d' ' -f1 /proc/loadavg))"
done
