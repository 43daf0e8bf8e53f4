#!/usr/bin/env bash
# The model suite's accuracy: each model trained by a fixed recipe on real data, on tessel (the
# estimator's `models_bench --accuracy`) and on its TF 2.15 TPUEstimator twin
# (tests/benches/tf/models.py --accuracy), alternating, ROUNDS times each. Neither side fixes
# its initializers' seed, so the rounds show the run-to-run spread.
#
#   bash tests/benches/models_accuracy.sh [ROUNDS]
#   MODELS="fashion mlp" bash tests/benches/models_accuracy.sh 5
#
# Recipes (steps at the suite's batch): mnist 2000 on MNIST (the guide's length, at the suite
# model's learning rate 0.01; train_eval_vs_tf.sh runs the guide's own recipe), fashion 1000,
# resnet20 500 and mlp 1000 on Fashion-MNIST, textcnn 600 on the keyword task of
# tests/benches/tf/text_task.py (written to a temporary directory). STEPS overrides every
# model's. The data and preprocessing are listed in estimator/examples/models/real_data.rs.
# Environment: MODELS, STEPS, FASHION_DIR (default ../shared/data/fashion-mnist), MNIST_DIR
# (default: the copy bundled in estimator/data/mnist), TF_PY (default /tmp/tf/bin/python).
# Needs a release build: cargo build --release -p tessel-estimator --example models_bench
#
# Prints the CPU, every run on standard error, and per model one line on standard output:
#   accuracy NAME steps S tessel MEAN [MIN, MAX] tf MEAN [MIN, MAX]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
MODELS=${MODELS:-"mnist fashion resnet20 mlp textcnn"}
TESSEL=./target/release/examples/models_bench
TF_PY=${TF_PY:-/tmp/tf/bin/python}
FASHION_DIR=${FASHION_DIR:-../shared/data/fashion-mnist}
MNIST_DIR=${MNIST_DIR:-estimator/data/mnist}
[ -x "$TESSEL" ] || {
    echo "build first: cargo build --release -p tessel-estimator --example models_bench" >&2
    exit 2
}
command -v "$TF_PY" >/dev/null || {
    echo "no TF python $TF_PY: set up /tmp/tf (tests/tf/README.md) or set TF_PY" >&2
    exit 2
}

. tests/benches/common.sh
print_cpu

text_dir=$(mktemp -d)
trap 'rm -rf "$text_dir"' EXIT
"$TF_PY" tests/benches/tf/text_task.py "$text_dir"

# recipe MODEL -> "steps data_dir"
recipe() {
    case $1 in
        mnist) echo "${STEPS:-2000} $MNIST_DIR" ;;
        fashion | mlp) echo "${STEPS:-1000} $FASHION_DIR" ;;
        resnet20) echo "${STEPS:-500} $FASHION_DIR" ;;
        textcnn) echo "${STEPS:-600} $text_dir" ;;
        *) echo "unknown model $1: mnist, fashion, resnet20, mlp or textcnn" >&2; exit 2 ;;
    esac
}

# "mean [min, max]" of the numbers on standard input.
spread() {
    awk '{s += $1; if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1}
         END {printf "%.4f [%.4f, %.4f]", s / NR, lo, hi}'
}

for model in $MODELS; do
    read -r steps dir <<<"$(recipe "$model")"
    [ -d "$dir" ] || { echo "no data directory $dir for $model" >&2; exit 2; }
    ours=() theirs=()
    for round in $(seq "$ROUNDS"); do
        line=$("$TESSEL" --model "$model" --accuracy --data-dir "$dir" --steps "$steps" --iterations 100)
        echo "round $round tessel: $line" >&2
        ours+=("$(awk '$1 == "accuracy" {print $3}' <<<"$line")")
        line=$("$TF_PY" tests/benches/tf/models.py "$model" --accuracy --data-dir "$dir" --steps "$steps" 2>/dev/null)
        echo "round $round tf: $line" >&2
        theirs+=("$(sed -n 's/^accuracy=//p' <<<"$line")")
    done
    echo "accuracy $model steps $steps tessel $(printf '%s\n' "${ours[@]}" | spread)" \
        "tf $(printf '%s\n' "${theirs[@]}" | spread)"
done
