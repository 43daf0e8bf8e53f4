#!/usr/bin/env bash
# The b128 MNIST train step on tessel's JIT against TensorFlow's TPUEstimator (and, with
# JAX=1, JAX's jitted step), alternating in one sitting so machine drift hits both alike.
#
#   bash tests/benches/step_vs_peers.sh [ROUNDS] [extra tessel run flags...]
#
# Needs a release build (`cargo build --release --bin tessel`) and the peers' environments
# from ../shared/peers/README.md in /tmp/tf (and /tmp/jax). Prints the CPU, every figure, then
# the medians and the ratio tessel / TF.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
shift || true
H=tests/corpus/conformance
PEERS=../shared/peers
TESSEL=./target/release/tessel
[ -x "$TESSEL" ] || { echo "build first: cargo build --release --bin tessel" >&2; exit 2; }
[ -x /tmp/tf/bin/python ] || { echo "set up TensorFlow as in $PEERS/README.md (/tmp/tf)" >&2; exit 2; }

. tests/benches/common.sh
print_cpu

ours=(); tf=(); jax=()
for r in $(seq "$ROUNDS"); do
    t=$("$TESSEL" run $H/mnist_cnn_train_step_b128.hlo \
        --inputs $H/mnist_cnn_train_step_b128.inputs.safetensors \
        --outputs /tmp/step_vs_peers.safetensors --backend jit --repeat 20 "$@" |
        awk '/run_ms_median/ {print $2}')
    p=$(/tmp/tf/bin/python $PEERS/tf_tpu_estimator_mnist.py 128 100 50 2>/dev/null |
        sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')
    line="round $r: tessel ${t} ms  tf ${p} ms"
    ours+=("$t"); tf+=("$p")
    if [ "${JAX:-0}" = 1 ] && [ -x /tmp/jax/bin/python ]; then
        j=$(/tmp/jax/bin/python $PEERS/jax_mnist_step.py 128 20 2>/dev/null |
            sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')
        line="$line  jax ${j} ms"; jax+=("$j")
    fi
    echo "$line  (load $(cut -d' ' -f1 /proc/loadavg))"
done
mo=$(printf '%s\n' "${ours[@]}" | median)
mt=$(printf '%s\n' "${tf[@]}" | median)
echo "median: tessel $mo ms, tf $mt ms, tessel/tf $(awk -v a="$mo" -v b="$mt" 'BEGIN {printf "%.2f", a/b}')"
if [ ${#jax[@]} -gt 0 ]; then
    mj=$(printf '%s\n' "${jax[@]}" | median)
    echo "median: jax $mj ms, tessel/jax $(awk -v a="$mo" -v b="$mj" 'BEGIN {printf "%.2f", a/b}')"
fi
