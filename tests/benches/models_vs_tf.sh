#!/usr/bin/env bash
# The model suite: each model's steady-state train step on tessel (the estimator's
# `models_bench` example) against its TF 2.15 TPUEstimator twin (tests/benches/tf/models.py),
# alternating in one sitting so machine drift hits both alike; then both again while one
# CPU-bound busy loop (not pinned) competes for the cores; and tessel on 1 thread.
#
#   bash tests/benches/models_vs_tf.sh [ROUNDS]
#   MODELS="mnist fashion" bash tests/benches/models_vs_tf.sh 3
#
# Environment: MODELS (default: all five), STEPS and ITERATIONS (override every model's),
# TF_CMD (default: /tmp/tf/bin/python tests/benches/tf/models.py; it is run as
# `$TF_CMD NAME --batch B --steps S --iterations I` and prints `ms_per_step=X setup_s=Y`).
# Needs a release build: cargo build --release -p tessel-estimator --example models_bench
#   -p tessel-kernels --example fma_peak
#
# Prints the CPU, every run on standard error, and per model one line on standard output:
#   model NAME tessel_ms X tf_ms Y ratio R loaded_ratio L compile_ms C threads_ratio T fma_threads_ratio F
# X, Y: median steady-state ms per step on a quiet machine; R = X / Y; L = (tessel loaded /
# tessel quiet) / (TF loaded / TF quiet), at most 1 when tessel slows no more than TF under
# contention; C: median compile time of tessel's train loop; T: tessel's 1-thread step over
# its step on all cores (TESSEL_THREADS unset); F: the FMA peak on all cores over one core's
# (runtime/kernels/examples/fma_peak.rs), read before tessel's runs on all cores and on one in
# each quiet round, the median over the rounds of the lower reading. F is what a compute-bound
# routine can gain from the threads at that minute: near 2 on two separate cores, near 1 when a
# virtual machine's two vCPUs are hyperthreads of one physical core, as the host may place them.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
MODELS=${MODELS:-"mnist fashion resnet20 mlp textcnn"}
TESSEL=./target/release/examples/models_bench
FMA_PEAK=./target/release/examples/fma_peak
TF_CMD=${TF_CMD:-"/tmp/tf/bin/python tests/benches/tf/models.py"}
[ -x "$TESSEL" ] && [ -x "$FMA_PEAK" ] || {
    echo "build first: cargo build --release -p tessel-estimator --example models_bench -p tessel-kernels --example fma_peak" >&2
    exit 2
}
read -r -a tf_cmd <<<"$TF_CMD"
command -v "${tf_cmd[0]}" >/dev/null || {
    echo "no TF command ${tf_cmd[0]}: set up /tmp/tf (tests/tf/README.md) or set TF_CMD" >&2
    exit 2
}

. tests/benches/common.sh
print_cpu

# The suite's batch, timed steps and steps per loop for a model.
shape() {
    case $1 in
        mnist | fashion | resnet20) b=128 ;;
        mlp) b=256 ;;
        textcnn) b=64 ;;
        *) echo "unknown model $1: mnist, fashion, resnet20, mlp or textcnn" >&2; exit 2 ;;
    esac
    s=${STEPS:-100}
    i=${ITERATIONS:-10}
    if [ "$1" = resnet20 ] && [ -z "${STEPS:-}" ]; then s=40; fi
    echo "$b $s $i"
}

# tessel_run MODEL THREADS(empty: unset) -> "ms compile_ms"
tessel_run() {
    local b s i env=()
    read -r b s i <<<"$(shape "$1")"
    [ -n "$2" ] && env=(TESSEL_THREADS="$2")
    env "${env[@]}" "$TESSEL" --model "$1" --batch "$b" --steps "$s" --iterations "$i" \
        --warmup-steps "$i" | awk '$1 == "model" {print $4, $6}'
}

# tf_run MODEL -> ms
tf_run() {
    local b s i
    read -r b s i <<<"$(shape "$1")"
    "${tf_cmd[@]}" "$1" --batch "$b" --steps "$s" --iterations "$i" 2>/dev/null |
        sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p' | tail -1
}

# The FMA peak on all cores over one core's, now.
fma_ratio() {
    "$FMA_PEAK" | awk '$1 == "fma_peak_gflops" {print $NF}'
}

# A number, or stop with what failed.
need() {
    [[ "$2" =~ ^[0-9.]+$ ]] || { echo "$1 printed no figure" >&2; exit 1; }
    echo "$2"
}

busy=""
stop_busy() {
    if [ -n "$busy" ]; then
        kill "$busy" 2>/dev/null || true
        wait "$busy" 2>/dev/null || true
        busy=""
    fi
}
trap stop_busy EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }

for m in $MODELS; do
    shape "$m" >/dev/null
    tq=(); fq=(); t1=(); cq=(); tl=(); fl=(); fr=()
    for r in $(seq "$ROUNDS"); do
        p0=$(need "fma_peak" "$(fma_ratio)")
        read -r t c <<<"$(tessel_run "$m" "")"
        t=$(need "tessel $m" "$t"); tq+=("$t"); cq+=("$c")
        f=$(need "TF $m" "$(tf_run "$m")"); fq+=("$f")
        p1=$(need "fma_peak" "$(fma_ratio)")
        p=$(awk -v a="$p0" -v b="$p1" 'BEGIN {print (a < b) ? a : b}'); fr+=("$p")
        o=$(need "tessel $m (1 thread)" "$(tessel_run "$m" 1 | cut -d' ' -f1)"); t1+=("$o")
        echo "$m quiet round $r: tessel $t ms (compile $c ms)  tf $f ms  tessel 1 thread $o ms  fma peak ratio $p0 and $p1  (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
    sh -c 'while :; do :; done' &
    busy=$!
    for r in $(seq "$ROUNDS"); do
        t=$(need "tessel $m (loaded)" "$(tessel_run "$m" "" | cut -d' ' -f1)"); tl+=("$t")
        f=$(need "TF $m (loaded)" "$(tf_run "$m")"); fl+=("$f")
        echo "$m loaded round $r: tessel $t ms  tf $f ms  (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
    stop_busy
    mq=$(printf '%s\n' "${tq[@]}" | median)
    mf=$(printf '%s\n' "${fq[@]}" | median)
    m1=$(printf '%s\n' "${t1[@]}" | median)
    mc=$(printf '%s\n' "${cq[@]}" | median)
    ml=$(printf '%s\n' "${tl[@]}" | median)
    mfl=$(printf '%s\n' "${fl[@]}" | median)
    mfr=$(printf '%s\n' "${fr[@]}" | median)
    loaded=$(awk -v a="$ml" -v b="$mq" -v c="$mfl" -v d="$mf" 'BEGIN {printf "%.3f", (a / b) / (c / d)}')
    echo "model $m tessel_ms $mq tf_ms $mf ratio $(ratio "$mq" "$mf") loaded_ratio $loaded compile_ms $mc threads_ratio $(ratio "$m1" "$mq") fma_threads_ratio $mfr"
done
