#!/usr/bin/env bash
# The b128 MNIST train step on 1 and on 2 threads, alternating in pairs so machine drift hits
# both alike: the target "the 1-thread step over the 2-thread step is at least 1.8". Also
# checks that both thread counts give bitwise the same outputs.
#
#   bash tests/benches/thread_ratio.sh [PAIRS]
#
# Needs a release build (`cargo build --release --bin tessel`). Prints the CPU, every pair
# and its ratio, then the median ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
PAIRS=${1:-5}
H=tests/corpus/conformance/mnist_cnn_train_step_b128
TESSEL=./target/release/tessel
[ -x "$TESSEL" ] || { echo "build first: cargo build --release --bin tessel" >&2; exit 2; }
. tests/benches/common.sh
print_cpu

step_ms() { # THREADS OUTPUT
    TESSEL_THREADS=$1 "$TESSEL" run $H.hlo --inputs $H.inputs.safetensors --outputs "$2" \
        --backend jit --repeat 40 | awk '/run_ms_median/ {print $2}'
}
ratios=()
for p in $(seq "$PAIRS"); do
    one=$(step_ms 1 /tmp/thread_ratio.1.safetensors)
    two=$(step_ms 2 /tmp/thread_ratio.2.safetensors)
    r=$(awk -v a="$one" -v b="$two" 'BEGIN {printf "%.3f", a/b}')
    ratios+=("$r")
    echo "pair $p: 1 thread $one ms  2 threads $two ms  ratio $r  (load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "median ratio: $(printf '%s\n' "${ratios[@]}" | median)"
if cmp -s /tmp/thread_ratio.1.safetensors /tmp/thread_ratio.2.safetensors; then
    echo "outputs: bitwise equal on 1 and 2 threads"
else
    echo "outputs: differ between 1 and 2 threads"
fi
