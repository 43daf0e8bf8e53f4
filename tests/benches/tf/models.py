"""The model suite's TensorFlow side: each model of model_fns.py through the real
TPUEstimator(use_tpu=False) of TF 2.15 on CPU.

Timing (the default):
    python tests/benches/tf/models.py NAME [--batch B] [--steps S] [--iterations I] [--threads T]
prints one line `ms_per_step=X setup_s=Y` on stdout (everything else goes to stderr), measured as
../shared/peers/tf_tpu_estimator_mnist.py does: a warm-up train(I) call, then a timed train(S)
call in the same model_dir with a hook that records the global step and the clock after every
session.run. With use_tpu=False each session.run is one step (iterations_per_loop = I is passed
to TPUConfig all the same).
  X: the median time per step over consecutive session.runs of the timed call (steady state).
  Y: the timed call's fixed cost before its steady state: from entering train() to the end of the
     first step, less one median step. That covers building the graph, creating the session,
     restoring the warm-up's checkpoint and TF's first-run graph optimization; the checkpoint save
     at the end of train() is not in it (stderr prints it within per_call_overhead_s, which is the
     call's wall time less S median steps, the peer's figure).
Inputs are synthetic, fixed-seed numpy arrays fed by
Dataset.from_tensor_slices(...).repeat().batch(B, drop_remainder=True).prefetch(4):
  mnist, mlp: 4096 x 784 floats uniform in [-0.5, 0.5) (mnist's are the peer's, same seed);
  fashion:    4096 x 28x28x1 floats uniform in [0, 1) (the twin's /255 scaling);
  resnet20:   1024 x 32x32x3 floats uniform in [-0.5, 0.5) (1024 so that the graph's data
              constant is the size of the peer's, 12.6 MB, and does not inflate Y);
  textcnn:    4096 x 200 int32 token ids uniform in [0, 20000);
  labels int32 uniform in [0, 10).
--threads T sets intra_op and inter_op parallelism to T (session_config); without it TF keeps its
defaults, as the peer does.
The model_dir is a temporary directory, removed when the script ends.

Accuracy (every model):
    python tests/benches/tf/models.py NAME --accuracy --data-dir DIR --steps N [--batch B]
trains N steps from a fresh model_dir on the training set in DIR (IDX files, gzipped or not;
shuffled with a 1024-example buffer, seed 7, as estimator/examples/fashion_mnist.rs does) and
prints `accuracy=A` on the whole test set. The data and features, as tessel's side
(estimator/examples/models/real_data.rs) makes them:
  mnist:    MNIST, pixel / 255 flattened to [784];
  mlp:      Fashion-MNIST, pixel / 255 flattened to [784];
  fashion:  Fashion-MNIST, pixel / 255, shape [28, 28, 1] (as tests/tf/fashion_twin.py and
            fashion_mnist.rs);
  resnet20: Fashion-MNIST, the 28x28 image padded with 2 black pixels on each side to 32x32,
            then pixel / 255 - 0.5 (so the border is -0.5, the background's value), repeated
            to 3 channels;
  textcnn:  the keyword task that text_task.py writes ({train,t10k}-{ids,labels}-idx*-int).
fashion's cosine decay runs to 0 over N steps (over I + S steps when timing). Variables are
initialized without a fixed seed, so repeated runs show the run-to-run spread.
"""
import argparse
import gzip
import os
import struct
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

# Keep the source tree clean: no __pycache__ beside the scripts.
sys.dont_write_bytecode = True
from model_fns import CLASSES, MODELS, TEXT_LEN, TEXT_VOCAB  # noqa: E402

tf.disable_v2_behavior()

ACCURACY_MODELS = ("mnist", "fashion", "resnet20", "mlp", "textcnn")


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def synthetic_data(name):
    """Fixed-seed features and labels for timing; see the module docstring."""
    rng = np.random.default_rng(0)
    n = 1024 if name == "resnet20" else 4096
    if name in ("mnist", "mlp"):
        x = rng.random((n, 784), dtype=np.float32) - 0.5
    elif name == "fashion":
        x = rng.random((n, 28, 28, 1), dtype=np.float32)
    elif name == "resnet20":
        x = rng.random((n, 32, 32, 3), dtype=np.float32) - 0.5
    else:
        x = rng.integers(0, TEXT_VOCAB, (n, TEXT_LEN)).astype(np.int32)
    y = rng.integers(0, CLASSES, n).astype(np.int32)
    return x, y


def read_idx(data_dir, name):
    """One IDX file of Fashion-MNIST, `name` or `name.gz` in data_dir, as a numpy array."""
    path = os.path.join(data_dir, name)
    if os.path.isfile(path):
        raw = open(path, "rb").read()
    elif os.path.isfile(path + ".gz"):
        raw = gzip.open(path + ".gz").read()
    else:
        raise FileNotFoundError(f"{data_dir} has neither {name} nor {name}.gz")
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    dtype = {0x08: np.uint8, 0x0C: np.dtype(">i4")}.get(raw[2])
    if dtype is None:
        raise ValueError(f"{path}: IDX type {raw[2]:#x} is neither u8 nor int32")
    return np.frombuffer(raw[4 + 4 * ndim:], dtype).reshape(dims)


def real_data(name, data_dir, split):
    """The split's features (before `preprocess`) and int32 labels."""
    kind = "ids-idx2-int" if name == "textcnn" else "images-idx3-ubyte"
    label_kind = "labels-idx1-int" if name == "textcnn" else "labels-idx1-ubyte"
    x = read_idx(data_dir, f"{split}-{kind}")
    y = read_idx(data_dir, f"{split}-{label_kind}").astype(np.int32)
    return (x.astype(np.int32) if name == "textcnn" else x), y


def preprocess(name):
    """Batched uint8 [b, 28, 28] images to the model's input; see the module docstring."""
    def fashion(images, labels):
        return tf.cast(images, tf.float32)[..., None] / 255.0, labels

    def resnet20(images, labels):
        padded = tf.pad(images, [[0, 0], [2, 2], [2, 2]])[..., None]
        x = tf.cast(padded, tf.float32) / 255.0 - 0.5
        return tf.tile(x, [1, 1, 1, 3]), labels

    def flat(images, labels):
        return tf.reshape(tf.cast(images, tf.float32) / 255.0, [-1, 784]), labels

    def ids(x, labels):
        return x, labels

    return {"mnist": flat, "mlp": flat, "fashion": fashion, "resnet20": resnet20,
            "textcnn": ids}[name]


def make_estimator(args, model_fn, batch, params, model_dir):
    session_config = None
    if args.threads:
        session_config = tf.ConfigProto(intra_op_parallelism_threads=args.threads,
                                        inter_op_parallelism_threads=args.threads)
    cfg = tf.estimator.tpu.RunConfig(
        model_dir=model_dir, save_checkpoints_steps=10**9,
        save_summary_steps=10**9, log_step_count_steps=10**9, session_config=session_config,
        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=args.iterations))
    return tf.estimator.tpu.TPUEstimator(model_fn=model_fn, use_tpu=False, train_batch_size=batch,
                                         eval_batch_size=batch, config=cfg, params=params)


class StepClock(tf.train.SessionRunHook):
    """The clock and the global step after every session.run (the peer's hook)."""

    def __init__(self):
        self.marks = []

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(tf.train.get_global_step())

    def after_run(self, run_context, run_values):
        self.marks.append((time.perf_counter(), int(run_values.results)))


def time_steps(args, model_fn, batch, model_dir):
    x, y = synthetic_data(args.name)

    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
        return ds.batch(params["batch_size"], drop_remainder=True).prefetch(4)

    params = {"decay_steps": args.iterations + args.steps}
    est = make_estimator(args, model_fn, batch, params, model_dir)
    t0 = time.perf_counter()
    est.train(input_fn, steps=args.iterations)
    log(f"warm-up train({args.iterations}) incl. graph build: {time.perf_counter() - t0:.2f}s")
    clock = StepClock()
    t0 = time.perf_counter()
    est.train(input_fn, steps=args.steps, hooks=[clock])
    wall = time.perf_counter() - t0
    marks = clock.marks
    rates = sorted((t1 - t0_) / (s1 - s0)
                   for (t0_, s0), (t1, s1) in zip(marks, marks[1:]) if s1 > s0)
    if not rates:
        raise RuntimeError(f"the timed train() made {len(marks)} session.run calls; "
                           "raise --steps for at least two")
    per_step = rates[len(rates) // 2]
    setup = marks[0][0] - t0 - per_step
    log(f"tf {tf.__version__} TPUEstimator(use_tpu=False) model={args.name} batch={batch} "
        f"steps={args.steps} session_runs={len(marks)} threads={args.threads or 'default'} "
        f"examples_per_s={batch / per_step:.1f} "
        f"per_call_overhead_s={wall - args.steps * per_step:.2f}")
    print(f"ms_per_step={1000 * per_step:.3f} setup_s={setup:.2f}", flush=True)


def accuracy(args, model_fn, batch, model_dir):
    train_x, train_y = real_data(args.name, args.data_dir, "train")
    test_x, test_y = real_data(args.name, args.data_dir, "t10k")
    prep = preprocess(args.name)

    def train_input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices((train_x, train_y)).shuffle(1024, seed=7).repeat()
        return ds.batch(params["batch_size"], drop_remainder=True).map(prep).prefetch(4)

    def eval_input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices((test_x, test_y))
        return ds.batch(params["batch_size"]).map(prep).prefetch(4)

    est = make_estimator(args, model_fn, batch, {"decay_steps": args.steps}, model_dir)
    t0 = time.perf_counter()
    est.train(train_input_fn, max_steps=args.steps)
    t1 = time.perf_counter()
    result = est.evaluate(eval_input_fn, steps=None)
    log(f"tf {tf.__version__} model={args.name} batch={batch} train_steps={args.steps} "
        f"train_s={t1 - t0:.1f} eval_s={time.perf_counter() - t1:.1f} "
        f"eval_loss={result['loss']:.4f} global_step={result['global_step']}")
    print(f"accuracy={result['accuracy']:.4f}", flush=True)


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted(MODELS))
    parser.add_argument("--batch", type=positive, help="default: the model's suite batch")
    parser.add_argument("--steps", type=positive, default=100,
                        help="steps of the timed train() call, or of training with --accuracy")
    parser.add_argument("--iterations", type=positive, default=50,
                        help="iterations_per_loop, and the warm-up train()'s steps")
    parser.add_argument("--threads", type=positive,
                        help="TF's intra- and inter-op parallelism (default: TF's own)")
    parser.add_argument("--accuracy", action="store_true",
                        help="train on real data and print test accuracy")
    parser.add_argument("--data-dir", help="the real data's IDX files, for --accuracy")
    args = parser.parse_args(argv)
    if args.accuracy:
        if args.name not in ACCURACY_MODELS:
            parser.error(f"--accuracy is for {' and '.join(ACCURACY_MODELS)}, not {args.name}")
        if not args.data_dir:
            parser.error("--accuracy needs --data-dir")
        if not os.path.isdir(args.data_dir):
            parser.error(f"--data-dir {args.data_dir} is not a directory")
    elif args.data_dir:
        parser.error("--data-dir is only read with --accuracy")
    elif args.steps < 2:
        parser.error("--steps must be at least 2 for a time between two steps")
    return args


def main(argv):
    args = parse_args(argv)
    model_fn, default_batch = MODELS[args.name]
    batch = args.batch or default_batch
    run = accuracy if args.accuracy else time_steps
    try:
        # Checkpoints go to a fresh model_dir, removed at the end.
        with tempfile.TemporaryDirectory(prefix=f"tf_{args.name}_") as model_dir:
            run(args, model_fn, batch, model_dir)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
