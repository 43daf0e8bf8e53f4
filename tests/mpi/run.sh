#!/usr/bin/env bash
# tessel across processes: `tessel run` under `mpirun` (loopback only) must give bitwise the
# outputs of one process running every replica, and a failing host, a dead host or a silent
# host must stop the whole job with a clear error, never hang. The estimator's MNIST example
# on 2 hosts must leave bitwise the checkpoint of one process with 2 shards, write only on the
# chief, and resume after a host is killed. Builds the CLI and the example with
# `--features mpi` (release); needs OpenMPI (Debian: libopenmpi-dev openmpi-bin, and
# libclang-dev clang to build).
set -euo pipefail
cd "$(dirname "$0")/../.."
# One cargo invocation for both: two would resolve the shared crates' features differently and
# build most of the workspace twice.
cargo build --release -p tessel -p tessel-estimator --features tessel/mpi,tessel-estimator/mpi \
  --bin tessel --example mnist
bin=$PWD/target/release/tessel
mnist=$PWD/target/release/examples/mnist
here=tests/mpi
corpus=tests/corpus/conformance
# Root in CI; shared memory and loopback only; 4 ranks on 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
ok() {
  echo "ok: $*"
  passed=$((passed + 1))
}
die() {
  echo "FAIL: $*" >&2
  exit 1
}

# same NAME HOSTS ARGS...: `tessel run ARGS` in one process, then on HOSTS processes; the
# output files must be byte for byte the same.
same() {
  local name=$1 hosts=$2
  shift 2
  "$bin" run "$@" --outputs "$tmp/$name.one.safetensors" >/dev/null
  timeout 300 mpirun -np "$hosts" "$bin" run "$@" --outputs "$tmp/$name.mpi.safetensors" \
    >/dev/null || die "$name: mpirun -np $hosts failed"
  cmp -s "$tmp/$name.one.safetensors" "$tmp/$name.mpi.safetensors" ||
    die "$name: $hosts hosts differ from one process"
  ok "$name: $hosts hosts give bitwise the outputs of one process"
}

# Every collective on 1-D, 2-D and uneven groups, both backends, 2 and 4 hosts.
for backend in interp jit; do
  for hosts in 2 4; do
    same "collectives_${backend}" "$hosts" "$here/collectives.hlo" \
      --inputs "$here/collectives.inputs.safetensors" --replicas 4 --backend "$backend"
  done
done
# all-to-all on 6 replicas: 1-D and 2-D groups, groups spanning the hosts unevenly
# ({5,0,3} on 2 x 3 and 3 x 2), the inner dimension, the tuple form; then JAX's shard_map
# all-to-all (4 partitions).
for backend in interp jit; do
  same "all_to_all_${backend}" 2 "$here/all_to_all.hlo" \
    --inputs "$here/all_to_all.inputs.safetensors" --replicas 6 --backend "$backend"
done
same all_to_all_3 3 "$here/all_to_all.hlo" \
  --inputs "$here/all_to_all.inputs.safetensors" --replicas 6 --backend jit
same sm_all_to_all 2 "$here/sm_all_to_all_r4.hlo" \
  --inputs "$here/sm_all_to_all_r4.inputs.safetensors" --replicas 4 --backend jit
# The replicas tests' data-parallel conformance modules (shard_map, global arrays).
same dp_tanh 2 "$corpus/dp_tanh_regression_r4.hlo" \
  --inputs "$corpus/dp_tanh_regression_r4.inputs.safetensors" --replicas 4 --backend jit
same dp_mnist_cnn 2 "$corpus/dp_mnist_cnn_train_step_r4_b32.hlo" \
  --inputs "$corpus/dp_mnist_cnn_train_step_r4_b32.inputs.safetensors" --replicas 4 --backend jit
# A 4-replica training loop as 2 hosts x 2 replicas.
for backend in interp jit; do
  same "loop_${backend}" 2 "$here/sgd_step.hlo" \
    --inputs "$here/sgd_step.loop6.inputs.safetensors" --replicas 4 --loop 6 --infeed 1 \
    --backend "$backend"
done

# --fast-allreduce: the all-reduce sums over every replica go through MPI's all-reduce (on
# 2 hosts x 2 replicas, (y0 + y1) + (y2 + y3) instead of ((y0 + y1) + y2) + y3). The inputs
# (fast_sum.inputs.safetensors) put +-1e8 next to small terms, so the order shows: the outputs
# differ from one process's, by at most 8 units of rounding of the 2e8 the terms add up to.
# floats FILE: every 4-byte value of a safetensors file's data, one a line.
floats() {
  local n
  n=$(od -A n -t u8 -N 8 "$1" | tr -d ' ')
  od -A n -v -t f4 -j $((8 + n)) "$1" | tr -s ' ' '\n' | sed '/^$/d'
}
fast=("$here/collectives.hlo" --inputs "$here/fast_sum.inputs.safetensors" --replicas 4 --backend jit)
"$bin" run "${fast[@]}" --outputs "$tmp/fast.one.safetensors" >/dev/null
timeout 120 mpirun -np 2 "$bin" run "${fast[@]}" --fast-allreduce --outputs "$tmp/fast.mpi.safetensors" \
  >/dev/null || die "--fast-allreduce on 2 hosts failed"
[ "$(floats "$tmp/fast.one.safetensors" | wc -l)" -gt 0 ] || die "--fast-allreduce: no outputs read"
if cmp -s "$tmp/fast.one.safetensors" "$tmp/fast.mpi.safetensors"; then
  die "--fast-allreduce on 2 hosts: bitwise one process's outputs (MPI's all-reduce did not run)"
fi
paste <(floats "$tmp/fast.one.safetensors") <(floats "$tmp/fast.mpi.safetensors") |
  awk 'NF != 2 { exit 1 } { d = $1 - $2; if (d < 0) d = -d; if (d > 8 * 1.2e-7 * 2e8) exit 1 }' ||
  die "--fast-allreduce on 2 hosts: outputs beyond rounding of one process's"
ok "--fast-allreduce on 2 hosts x 2 replicas: MPI's sum, within rounding of one process"
# Hosts that disagree on it: an error on every host, before any collective.
if timeout 60 mpirun -np 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$@" --fast-allreduce; fi; exec "$@"' \
  sh "$bin" run "$here/collectives.hlo" --inputs "$here/collectives.inputs.safetensors" --replicas 4 \
  --outputs "$tmp/x" >/dev/null 2>"$tmp/fastmix.err"; then
  die "--fast-allreduce on one host only: the job succeeded"
fi
grep -q "fast-allreduce is o[nf]* on host [01] but o[nf]* on host [01]" "$tmp/fastmix.err" ||
  die "--fast-allreduce on one host only: $(cat "$tmp/fastmix.err")"
ok "--fast-allreduce on one host only: refused on every host"

# Replicas that do not split over the hosts: a clear error.
if timeout 60 mpirun -np 2 "$bin" run "$here/collectives.hlo" --replicas 3 \
  --inputs "$here/collectives.inputs.safetensors" --outputs "$tmp/x" 2>"$tmp/split.err" >/dev/null; then
  die "3 replicas on 2 hosts ran"
fi
grep -q "3 replicas do not split evenly over the 2 hosts" "$tmp/split.err" ||
  die "3 replicas on 2 hosts: $(cat "$tmp/split.err")"
ok "3 replicas on 2 hosts: refused"

# on_hosts ARGS...: mpirun -np 2 where host h reads --inputs FILE.h, records its pid in
# $tmp/pid.h, and runs the collectives module many times (a long run to break).
on_hosts() {
  timeout 120 mpirun -np 2 sh -c 'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; exec "$@" --inputs "$0/in.$OMPI_COMM_WORLD_RANK"' \
    "$tmp" "$bin" run "$here/collectives.hlo" --replicas 4 --outputs "$tmp/fault.out" "$@"
}
cp "$here/collectives.inputs.safetensors" "$tmp/in.0"
cp "$here/collectives.inputs.safetensors" "$tmp/in.1"

# A host that fails: its error stops the other host, which names it.
echo "not safetensors" >"$tmp/in.1"
start=$SECONDS
if TESSEL_MPI_TIMEOUT_SECS=30 on_hosts --repeat 100000 >/dev/null 2>"$tmp/fail.err"; then
  die "a failing host: the job succeeded"
fi
grep -q "host 1: .*in.1" "$tmp/fail.err" || die "a failing host: no error of host 1: $(cat "$tmp/fail.err")"
grep -q "host 0: .*host 1 failed: .*in.1" "$tmp/fail.err" ||
  die "a failing host: host 0 did not stop with host 1's error: $(cat "$tmp/fail.err")"
ok "a failing host stops the other with its error ($((SECONDS - start)) s)"
cp "$here/collectives.inputs.safetensors" "$tmp/in.1"

# break SIGNAL: host 1 gets SIGNAL mid-run; the job must end within the timeout (5 s).
break_host() {
  rm -f "$tmp"/pid.*
  TESSEL_MPI_TIMEOUT_SECS=5 on_hosts --repeat 1000000 >/dev/null 2>"$tmp/$1.err" &
  local job=$!
  while [ ! -s "$tmp/pid.1" ]; do sleep 0.1; done
  sleep 2
  local start=$SECONDS
  kill "-$1" "$(cat "$tmp/pid.1")"
  if wait "$job"; then die "host 1 got SIG$1: the job succeeded"; fi
  elapsed=$((SECONDS - start))
  [ "$elapsed" -le 15 ] || die "host 1 got SIG$1: the job took $elapsed s to end"
}
# A host killed outright: the job ends (mpirun or the heartbeat notices).
break_host KILL
ok "kill -9 of host 1 mid-run: the job ended in $elapsed s"
# A host that stops answering (stopped, not dead): the heartbeat timeout names it.
break_host STOP
grep -q "host 1 (replicas 2..3) sent nothing for [0-9]* s" "$tmp/STOP.err" ||
  die "a silent host: $(cat "$tmp/STOP.err")"
ok "a silent host is named after the heartbeat timeout ($elapsed s)"

# The estimator: MNIST (the bundled data) for 200 steps as 2 hosts x 1 shard against one
# process with 2 shards; the checkpoint must be bitwise the same.
train=(--mode train --train-steps 200 --iterations 10 --batch-size 128 --num-shards 2
  --random-seed 7 --save-checkpoints-steps 50 --keep-checkpoint-max 0)
"$mnist" "${train[@]}" --model-dir "$tmp/est_one" >/dev/null 2>"$tmp/est_one.err" ||
  die "MNIST in one process: $(cat "$tmp/est_one.err")"
timeout 600 mpirun -np 2 "$mnist" "${train[@]}" --model-dir "$tmp/est_two" >/dev/null \
  2>"$tmp/est_two.err" || die "MNIST on 2 hosts: $(cat "$tmp/est_two.err")"
for step in 50 200; do
  cmp -s "$tmp/est_one/model.ckpt-$step.safetensors" "$tmp/est_two/model.ckpt-$step.safetensors" ||
    die "MNIST on 2 hosts: the checkpoint of step $step differs from one process's"
done
ok "MNIST on 2 hosts x 1 shard: the checkpoints of steps 50 and 200 are bitwise those of 1 x 2"
# The logged loss is the mean over every shard of the job, on every host, as one process logs it.
losses() { grep -o 'loss = [0-9.e+-]*, step = [0-9]*' "$1" | sort -u; }
[ -n "$(losses "$tmp/est_one.err")" ] && [ "$(losses "$tmp/est_one.err")" = "$(losses "$tmp/est_two.err")" ] ||
  die "MNIST on 2 hosts logs the losses $(losses "$tmp/est_two.err" | tr '\n' ' '), one process $(losses "$tmp/est_one.err" | tr '\n' ' ')"
ok "MNIST on 2 hosts logs one process's losses ($(losses "$tmp/est_one.err" | wc -l) lines)"
# The step's gradient all-reduces are combined into one exchange (the all-reduce-combiner
# pass); one process with the pass turned off, an all-reduce per gradient, must leave the same
# checkpoint as the 2 hosts' combined step.
XLA_FLAGS=--xla_disable_hlo_passes=all-reduce-combiner "$mnist" "${train[@]}" \
  --model-dir "$tmp/est_separate" >/dev/null 2>"$tmp/est_separate.err" ||
  die "MNIST in one process without the combiner: $(cat "$tmp/est_separate.err")"
cmp -s "$tmp/est_separate/model.ckpt-200.safetensors" "$tmp/est_two/model.ckpt-200.safetensors" ||
  die "MNIST: the combined step on 2 hosts differs from separate all-reduces in one process"
ok "MNIST: the combined step on 2 hosts x 1 shard is bitwise 1 x 2 with an all-reduce per gradient"
# --fast-allreduce: MPI adds the 2 hosts' gradients; a sum of two is the same in either
# order, so the checkpoint is still bitwise one process's.
timeout 600 mpirun -np 2 "$mnist" "${train[@]}" --fast-allreduce --model-dir "$tmp/est_fast" >/dev/null \
  2>"$tmp/est_fast.err" || die "MNIST on 2 hosts with --fast-allreduce: $(cat "$tmp/est_fast.err")"
cmp -s "$tmp/est_one/model.ckpt-200.safetensors" "$tmp/est_fast/model.ckpt-200.safetensors" ||
  die "MNIST on 2 hosts with --fast-allreduce: the checkpoint of step 200 differs from one process's"
ok "MNIST on 2 hosts with --fast-allreduce: the step-200 checkpoint is bitwise 1 x 2's (a sum of two)"
# The same files as one process's: one event file (the chief's), no lock left.
files() { (cd "$1" && ls -A | sed 's/^events\.out\.tfevents\..*/events/'); }
[ "$(files "$tmp/est_one")" = "$(files "$tmp/est_two")" ] ||
  die "MNIST on 2 hosts: model_dir holds $(files "$tmp/est_two" | tr '\n' ' '), one process's $(files "$tmp/est_one" | tr '\n' ' ')"
ok "MNIST on 2 hosts: the model_dir holds what one process leaves"

# on_own_dirs ARGS...: the example on 2 hosts, host h with model_dir $tmp/est_kill.h and its
# pid in $tmp/pid.h. Host 1's model_dir must stay empty: the chief alone reads the checkpoint
# (and sends its state) and writes.
on_own_dirs() {
  mkdir -p "$tmp/est_kill.0" "$tmp/est_kill.1"
  timeout 600 mpirun -np 2 sh -c 'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; exec "$@" --model-dir "$0/est_kill.$OMPI_COMM_WORLD_RANK"' \
    "$tmp" "$mnist" "${train[@]}" "$@"
}
# Kill -9 host 1 mid-loop, once the checkpoint of step 50 is written: the job ends in time.
rm -f "$tmp"/pid.*
TESSEL_MPI_TIMEOUT_SECS=5 on_own_dirs >/dev/null 2>"$tmp/est_kill.err" &
job=$!
while [ ! -e "$tmp/est_kill.0/model.ckpt-50.safetensors" ]; do
  kill -0 "$job" 2>/dev/null || die "MNIST kill: the job ended early: $(cat "$tmp/est_kill.err")"
  sleep 0.05
done
start=$SECONDS
kill -KILL "$(cat "$tmp/pid.1")"
if wait "$job"; then die "MNIST: host 1 was killed, but the job succeeded"; fi
elapsed=$((SECONDS - start))
[ "$elapsed" -le 15 ] || die "MNIST: host 1 killed, the job took $elapsed s to end"
# mpirun notices the death first and says so; otherwise the chief's heartbeat names host 1.
grep -Eq "rank 1 .*exited on signal 9|host 1 " "$tmp/est_kill.err" ||
  die "MNIST: host 1 killed, no error names it: $(cat "$tmp/est_kill.err")"
[ -z "$(ls -A "$tmp/est_kill.1")" ] || die "host 1 wrote in its model_dir: $(ls -A "$tmp/est_kill.1")"
[ ! -e "$tmp/est_kill.0/model.ckpt-200.safetensors" ] || die "MNIST kill: training ended before the kill"
ok "MNIST: kill -9 of host 1 mid-loop ended the job in $elapsed s; host 1 wrote nothing"
# The same command resumes from the chief's last checkpoint, to the same step-200 checkpoint.
on_own_dirs >/dev/null 2>"$tmp/est_resume.err" || die "MNIST resume: $(cat "$tmp/est_resume.err")"
grep -q "Restoring parameters from .*model.ckpt-[1-9][0-9]*" "$tmp/est_resume.err" ||
  die "MNIST resume did not restore a checkpoint: $(cat "$tmp/est_resume.err")"
cmp -s "$tmp/est_one/model.ckpt-200.safetensors" "$tmp/est_kill.0/model.ckpt-200.safetensors" ||
  die "MNIST resume: the checkpoint of step 200 differs from an uninterrupted run's"
[ -z "$(ls -A "$tmp/est_kill.1")" ] || die "host 1 wrote in its model_dir: $(ls -A "$tmp/est_kill.1")"
ok "MNIST: a restart resumed from $(grep -o 'model.ckpt-[0-9]*' "$tmp/est_resume.err" | head -1) to bitwise the uninterrupted checkpoint"

# Evaluation on the chief alone, with its own program: the accuracy of one process's.
eval_one=$("$mnist" --mode evaluate --num-shards 2 --eval-steps 5 --model-dir "$tmp/est_one" 2>/dev/null | grep -o 'accuracy=[0-9.]*')
eval_two=$(timeout 300 mpirun -np 2 "$mnist" --mode evaluate --num-shards 2 --eval-steps 5 \
  --model-dir "$tmp/est_two" 2>/dev/null | grep -o 'accuracy=[0-9.]*') || die "MNIST evaluate on 2 hosts failed"
[ "$eval_one" = "$eval_two" ] || die "MNIST evaluate on 2 hosts: $eval_two, one process: $eval_one"
ok "MNIST evaluate on 2 hosts runs on the chief: $eval_two as in one process"

# train_and_evaluate on 2 hosts: every host trains, the chief evaluates at steps 50 and 100;
# the result is one process's (the training is bitwise the same). Run again on the trained
# model_dir, every host follows the chief's decision to evaluate without training.
tae=(--mode train_and_evaluate --train-steps 100 --iterations 5 --batch-size 128 --num-shards 2
  --random-seed 7 --eval-steps 5)
tae_one=$("$mnist" "${tae[@]}" --model-dir "$tmp/tae_one" 2>/dev/null | grep -o 'global_step=.* loss=[0-9.]*') ||
  die "train_and_evaluate in one process failed"
for round in train trained; do
  timeout 600 mpirun -np 2 "$mnist" "${tae[@]}" --model-dir "$tmp/tae_two" >"$tmp/tae.out" \
    2>"$tmp/tae.err" || die "train_and_evaluate on 2 hosts ($round): $(cat "$tmp/tae.err")"
  tae_two=$(grep -o 'global_step=.* loss=[0-9.]*' "$tmp/tae.out") ||
    die "train_and_evaluate on 2 hosts ($round): no evaluation: $(cat "$tmp/tae.out")"
  [ "$tae_one" = "$tae_two" ] ||
    die "train_and_evaluate on 2 hosts ($round): $tae_two, one process: $tae_one"
  grep -q "host 1: tessel trained to step 100 (the chief evaluates)" "$tmp/tae.out" ||
    die "train_and_evaluate on 2 hosts ($round): host 1 said $(cat "$tmp/tae.out")"
  # The chief's two evaluations, written as one process writes them.
  [ "$round" = trained ] || [ "$(files "$tmp/tae_one/eval")" = "$(files "$tmp/tae_two/eval")" ] ||
    die "train_and_evaluate on 2 hosts: eval/ holds $(ls "$tmp/tae_two/eval" | tr '\n' ' ')"
done
ok "MNIST train_and_evaluate on 2 hosts: the chief evaluates, $tae_two as in one process"

# Early stopping on 2 hosts: the chief evaluates and its stop is every host's; training stops
# at the step one process stops at (before --train-steps), with the same checkpoint.
es=(--mode train --train-steps 600 --iterations 5 --batch-size 128 --num-shards 2
  --random-seed 7 --eval-steps 2 --early-stopping-steps 20)
"$mnist" "${es[@]}" --model-dir "$tmp/es_one" >/dev/null 2>"$tmp/es_one.err" ||
  die "early stopping in one process: $(cat "$tmp/es_one.err")"
timeout 600 mpirun -np 2 "$mnist" "${es[@]}" --model-dir "$tmp/es_two" >/dev/null \
  2>"$tmp/es_two.err" || die "early stopping on 2 hosts: $(cat "$tmp/es_two.err")"
last=$(cd "$tmp/es_one" && ls model.ckpt-*.safetensors | sort -t- -k2 -n | tail -1)
[ "$last" != model.ckpt-600.safetensors ] || die "early stopping in one process did not stop early"
cmp -s "$tmp/es_one/$last" "$tmp/es_two/$last" ||
  die "early stopping on 2 hosts: $last differs from one process's ($(ls "$tmp/es_two" | tr '\n' ' '))"
[ "$(files "$tmp/es_one")" = "$(files "$tmp/es_two")" ] ||
  die "early stopping on 2 hosts: model_dir holds $(ls -A "$tmp/es_two" | tr '\n' ' ')"
ok "MNIST early stopping on 2 hosts stops where one process does ($last), bitwise"

# TF_CONFIG under mpirun (OpenMPI's MPMD form, one task per rank): the chief and a worker
# train; tasks given to the wrong ranks stop every host with the error naming both.
cluster='"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223"]}'
task() { echo "{$cluster, \"task\": {\"type\": \"$1\", \"index\": 0}}"; }
tfc=(--mode train --train-steps 20 --iterations 10 --num-shards 2 --random-seed 7)
timeout 300 mpirun -np 1 env TF_CONFIG="$(task chief)" "$mnist" "${tfc[@]}" --model-dir "$tmp/tfc" \
  : -np 1 env TF_CONFIG="$(task worker)" "$mnist" "${tfc[@]}" --model-dir "$tmp/tfc" \
  >/dev/null 2>"$tmp/tfc.err" || die "TF_CONFIG chief + worker under mpirun: $(cat "$tmp/tfc.err")"
[ -f "$tmp/tfc/model.ckpt-20.safetensors" ] || die "TF_CONFIG chief + worker: no step-20 checkpoint"
if timeout 300 mpirun -np 1 env TF_CONFIG="$(task worker)" "$mnist" "${tfc[@]}" --model-dir "$tmp/tfc_swapped" \
  : -np 1 env TF_CONFIG="$(task chief)" "$mnist" "${tfc[@]}" --model-dir "$tmp/tfc_swapped" \
  >/dev/null 2>"$tmp/tfc_swapped.err"; then
  die "TF_CONFIG tasks on the wrong ranks trained"
fi
grep -q "TF_CONFIG's task is worker 0, which is MPI rank 1, but this process is rank 0 of 2" "$tmp/tfc_swapped.err" ||
  die "TF_CONFIG tasks on the wrong ranks: $(cat "$tmp/tfc_swapped.err")"
ok "TF_CONFIG under mpirun: chief and worker train; tasks on the wrong ranks are an error naming both"

echo "tests/mpi/run.sh: $passed passed"
