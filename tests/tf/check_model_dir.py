"""Reads a tessel estimator model_dir with TensorBoard's own EventAccumulator and TF's
checkpoint-state parser, and checks the scalars are there and sane.

Make the model_dir with the MNIST example, then run this in the TF venv:

    cargo run --release -p tessel-estimator --example mnist -- \
        --train-steps 200 --eval-steps 10 --model-dir DIR
    /tmp/tf/bin/python tests/tf/check_model_dir.py DIR [TRAIN_STEPS]

Checks:
- model_dir's event files: `loss` at every save_summary_steps (100) and at the last step,
  finite, falling; `learning_rate` (the example's host_call) finite and positive;
  `global_step/sec` and `examples/sec` positive with examples/sec = 128 x global_step/sec.
- model_dir/eval: `accuracy` in [0, 1] (above chance), `loss` finite, at the last step.
- `checkpoint`: tf.train.get_checkpoint_state parses it and names model.ckpt-TRAIN_STEPS.
Prints what it read; exits non-zero on the first failed check.
"""

import math
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def scalars(path):
    acc = EventAccumulator(path, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def main():
    model_dir = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    train = scalars(model_dir)
    for tag, values in sorted(train.items()):
        print(f"train {tag}: {values}")
    for tag in ["loss", "learning_rate", "global_step/sec", "examples/sec"]:
        check(tag in train, f"train scalar {tag} present")
    loss = train["loss"]
    want = sorted({s for s in range(100, steps + 1, 100)} | {steps})
    check([s for s, _ in loss] == want, f"loss at steps {want}")
    check(all(math.isfinite(v) and v > 0 for _, v in loss), "loss finite and positive")
    check(loss[-1][1] < 2.3, f"loss fell below ln(10) = 2.30 (last {loss[-1][1]:.4f})")
    check(all(math.isfinite(v) and 0 < v < 1 for _, v in train["learning_rate"]), "learning_rate sane")
    rates = dict(train["global_step/sec"])
    check(all(v > 0 for v in rates.values()), "global_step/sec positive")
    for s, ex in train["examples/sec"]:
        check(abs(ex / rates[s] - 128) < 1e-2 * 128, f"examples/sec = 128 x global_step/sec at {s}")

    ev = scalars(os.path.join(model_dir, "eval"))
    for tag, values in sorted(ev.items()):
        print(f"eval {tag}: {values}")
    check("accuracy" in ev and "loss" in ev, "eval accuracy and loss present")
    check(ev["accuracy"][-1][0] == steps, f"eval at global step {steps}")
    acc = ev["accuracy"][-1][1]
    check(0.2 < acc <= 1.0, f"eval accuracy above chance ({acc:.4f})")
    check(math.isfinite(ev["loss"][-1][1]), "eval loss finite")

    import tensorflow as tf

    state = tf.train.get_checkpoint_state(model_dir)
    check(state is not None, "tf.train.get_checkpoint_state parses `checkpoint`")
    latest = os.path.basename(state.model_checkpoint_path)
    check(latest == f"model.ckpt-{steps}", f"latest checkpoint model.ckpt-{steps} ({latest})")
    check(
        os.path.exists(os.path.join(model_dir, latest + ".safetensors")),
        "the named checkpoint exists",
    )
    print("all checks passed")


if __name__ == "__main__":
    main()
