"""TensorFlow cross-check of tessel's TFRecord, tf.train.Example and event files.

Run by hand with the TF 2.15 environment (CI has no TensorFlow), from the repository root:

    cargo build --release -p tessel && cargo build --release -p tessel-estimator --examples
    /tmp/tf/bin/python tests/tf/check_tfrecords.py IDX_DIR [PEERS_DIR]

(a) converts MNIST with TF's writer (PEERS_DIR/tf_convert_to_records.py, default
    ../shared/peers) and with `tessel data convert-mnist`, reads both files with tessel
    (the `records_tool dump` example) and with TF (TFRecordDataset + parse_single_example +
    decode_raw), and checks all four readings agree tensor for tensor;
(b) writes a tessel event file and reads it with TensorBoard's EventAccumulator.
`--fixture PATH` instead writes the tf.train.Example bytes of estimator/tests/fixtures/tf_example.pb.
"""
import os, subprocess, sys, tempfile
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESSEL = os.path.join(ROOT, "target/release/tessel")
TOOL = os.path.join(ROOT, "target/release/examples/records_tool")


def fixture(path):
    f = tf.train.Feature
    ex = tf.train.Example(features=tf.train.Features(feature={
        "x": f(float_list=tf.train.FloatList(value=[1.5, -2.0])),
        "label": f(int64_list=tf.train.Int64List(value=[7])),
        "neg": f(int64_list=tf.train.Int64List(value=[-1])),
        "image_raw": f(bytes_list=tf.train.BytesList(value=[b"\x00\x01\xff"]))}))
    open(path, "wb").write(ex.SerializeToString(deterministic=True))


def read_tf(path):
    spec = {"image_raw": tf.io.FixedLenFeature([], tf.string),
            **{k: tf.io.FixedLenFeature([], tf.int64) for k in ("label", "height", "width", "depth")}}
    images, labels, shapes = [], [], []
    for rec in tf.data.TFRecordDataset(path):
        e = tf.io.parse_single_example(rec, spec)
        images.append(tf.io.decode_raw(e["image_raw"], tf.uint8).numpy())
        labels.append(int(e["label"]))
        shapes.append([int(e[k]) for k in ("height", "width", "depth")])
    return np.stack(images), np.array(labels, np.int32), np.array(shapes, np.int32)


def read_tessel(path, tmp):
    out = os.path.join(tmp, "dump")
    subprocess.run([TOOL, "dump", path, out], check=True)
    images = np.fromfile(out + ".images", np.uint8).reshape(-1, 784)
    labels = np.fromfile(out + ".labels", np.int32)
    shapes = np.fromfile(out + ".shape", np.int32).reshape(-1, 3)
    return images, labels, shapes


def check_records(idx_dir, peers, tmp):
    tf_dir, ts_dir = os.path.join(tmp, "tf"), os.path.join(tmp, "tessel")
    subprocess.run([sys.executable, os.path.join(peers, "tf_convert_to_records.py"), idx_dir, tf_dir], check=True)
    subprocess.run([TESSEL, "data", "convert-mnist", idx_dir, ts_dir], check=True)
    for split, n in (("train", 60000), ("test", 10000)):
        readings = {}
        for writer, d in (("tf", tf_dir), ("tessel", ts_dir)):
            path = os.path.join(d, f"{split}.tfrecords")
            readings[f"{writer} file, tf reader"] = read_tf(path)
            readings[f"{writer} file, tessel reader"] = read_tessel(path, tmp)
        ref_name, ref = next(iter(readings.items()))
        assert ref[0].shape == (n, 784), ref[0].shape
        for name, got in readings.items():
            for a, b, what in zip(ref, got, ("images", "labels", "height/width/depth")):
                assert a.dtype == b.dtype and np.array_equal(a, b), f"{split}: {what} of {name} != {ref_name}"
        same = open(os.path.join(tf_dir, f"{split}.tfrecords"), "rb").read() == \
            open(os.path.join(ts_dir, f"{split}.tfrecords"), "rb").read()
        print(f"{split}: {n} examples, all four readings agree"
              f" (files byte-identical: {same}; TF orders map keys by insertion, tessel sorts them)")


def check_events(tmp):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    path = subprocess.run([TOOL, "events", os.path.join(tmp, "events")], check=True,
                          capture_output=True, text=True).stdout.strip()
    acc = EventAccumulator(path)
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    assert tags == ["learning_rate", "loss"], tags
    loss = acc.Scalars("loss")
    assert [e.step for e in loss] == list(range(0, 100, 10)), loss
    assert all(abs(e.value - 1.0 / (e.step + 1)) < 1e-7 for e in loss), loss
    assert all(abs(e.value - 0.05) < 1e-7 for e in acc.Scalars("learning_rate"))
    print(f"events: EventAccumulator reads {os.path.basename(path)}: tags {tags}, {len(loss)} steps, values exact")


if __name__ == "__main__":
    if sys.argv[1] == "--fixture":
        fixture(sys.argv[2])
        sys.exit(0)
    peers = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "../shared/peers")
    with tempfile.TemporaryDirectory() as tmp:
        check_records(sys.argv[1], peers, tmp)
        check_events(tmp)
    print("OK")
