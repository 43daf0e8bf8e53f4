"""The real check of warm start from TensorFlow: a TF-trained checkpoint evaluates in tessel at
TF's accuracy.

usage: /tmp/tf/bin/python tests/tf/check_warm_start.py [WORK_DIR] [STEPS]   (run from the repo root;
       defaults /tmp/tessel_warm_start, 300)

1. converts ../shared's MNIST IDX files to TFRecords with TF's own writer (peers/tf_convert_to_records.py);
2. trains the guide's MNIST model STEPS steps with TF 2.15's TPUEstimator (peers/tf_train_eval.py), which then
   evaluates 78 batches of 128 and writes the accuracy into MODEL_DIR/eval/ events;
3. runs `mnist --mode evaluate --warm-start-from MODEL_DIR --eval-steps 78` on the same test TFRecords
   with an empty model_dir: tessel reads TF's checkpoint natively;
4. compares the two accuracies (and losses); fails unless they agree within 1e-3.
"""
import glob, os, re, subprocess, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

work = sys.argv[1] if len(sys.argv) > 1 else "/tmp/tessel_warm_start"
steps = sys.argv[2] if len(sys.argv) > 2 else "300"
repo = os.getcwd()
peers = os.path.join(repo, "..", "shared", "peers")
if not os.path.isdir(peers):
    peers = "/work/shared/peers"
idx = os.path.join(os.path.dirname(peers), "data", "mnist")
records, tf_dir, ts_dir = (os.path.join(work, d) for d in ("records", "tf_model", "tessel_model"))
os.makedirs(work, exist_ok=True)
if not os.path.exists(os.path.join(records, "test.tfrecords")):
    subprocess.run([sys.executable, os.path.join(peers, "tf_convert_to_records.py"), idx, records], check=True)
subprocess.run(["rm", "-rf", tf_dir, ts_dir], check=True)
tf_out = subprocess.run([sys.executable, os.path.join(peers, "tf_train_eval.py"), tf_dir,
                         os.path.join(records, "train.tfrecords"), os.path.join(records, "test.tfrecords"),
                         steps], check=True, capture_output=True, text=True).stdout
print(tf_out.strip().splitlines()[-1])

import tensorflow as tf  # after the subprocesses: only to read TF's eval events exactly
tf_metrics = {}
for f in glob.glob(os.path.join(tf_dir, "eval", "events*")):
    for e in tf.compat.v1.train.summary_iterator(f):
        for v in e.summary.value:
            if v.HasField("simple_value"):
                tf_metrics[v.tag] = v.simple_value

subprocess.run(["cargo", "build", "--release", "-p", "tessel-estimator", "--example", "mnist"], check=True)
ts = subprocess.run([os.path.join(repo, "target", "release", "examples", "mnist"), "--mode", "evaluate",
                     "--warm-start-from", tf_dir, "--eval-steps", "78", "--model-dir", ts_dir,
                     "--eval-file", os.path.join(records, "test.tfrecords")],
                    check=True, capture_output=True, text=True)
saved = re.search(r"Saving dict for global step \d+: accuracy = ([0-9.]+), global_step = \d+, loss = ([0-9.]+)",
                  ts.stderr)
ts_acc, ts_loss = float(saved.group(1)), float(saved.group(2))
print(f"TF     accuracy={tf_metrics['accuracy']:.8f} loss={tf_metrics['loss']:.8f}")
print(f"tessel accuracy={ts_acc:.8f} loss={ts_loss:.8f}")
diff = abs(ts_acc - tf_metrics["accuracy"])
print(f"|accuracy difference| = {diff:.2e} ({'OK' if diff <= 1e-3 else 'FAIL'}, limit 1e-3)")
sys.exit(0 if diff <= 1e-3 else 1)
