"""Writes the tiny TensorFlow checkpoint that tessel's TF-bundle reader is tested on.

usage: /tmp/tf/bin/python tests/tf/make_tf_ckpt_fixture.py [OUT_DIR]
       (default estimator/tests/fixtures/tf_ckpt)

TF 2.15's v1 `tf.train.Saver` writes OUT_DIR/model.ckpt-7.{index,data-00000-of-00001} plus the
`checkpoint` state file, from a graph made as a model_fn would make it (tf.layers names, a
global_step int64, an int32 counter, a non-trainable variable, a float64 one tessel refuses,
and Momentum slots). The expected
values go to OUT_DIR/expected.json as {name: {"dtype", "shape", "values" (flattened)}}, read
back from the checkpoint with tf.train.load_checkpoint (TF's own reader), so the test compares
tessel's reader with TF's.
"""
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()

out = sys.argv[1] if len(sys.argv) > 1 else "estimator/tests/fixtures/tf_ckpt"
os.makedirs(out, exist_ok=True)
for f in os.listdir(out):
    os.remove(os.path.join(out, f))

tf.set_random_seed(1234)
gs = tf.train.get_or_create_global_step()
x = tf.placeholder(tf.float32, [None, 3])
h = tf.layers.dense(x, 4, activation=tf.nn.relu, name="dense")
y = tf.layers.dense(h, 2, name="dense_1")
with tf.variable_scope("extra"):
    counter = tf.get_variable("counter", [2], tf.int32, initializer=tf.constant_initializer([3, -5]),
                              trainable=False)
    scale = tf.get_variable("scale", [], tf.float32, initializer=tf.constant_initializer(2.5),
                            trainable=False)
    # A dtype tessel does not read: the reader must refuse it by name.
    wide = tf.get_variable("wide", [2], tf.float64, initializer=tf.constant_initializer(0.25),
                           trainable=False)
loss = tf.reduce_mean(tf.square(y))
train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss, global_step=gs)
saver = tf.train.Saver()
rng = np.random.RandomState(0)
with tf.Session() as s:
    s.run(tf.global_variables_initializer())
    for _ in range(7):
        s.run(train, {x: rng.randn(5, 3).astype(np.float32)})
    prefix = saver.save(s, os.path.join(out, "model.ckpt"), global_step=gs, write_meta_graph=False)

reader = tf.train.load_checkpoint(prefix)
dtypes = reader.get_variable_to_dtype_map()
expected = {}
for name, shape in sorted(reader.get_variable_to_shape_map().items()):
    v = np.asarray(reader.get_tensor(name))
    expected[name] = {"dtype": dtypes[name].name, "shape": list(shape),
                      "values": [x.item() for x in v.reshape(-1)]}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
# The state file names the prefix absolutely; rewrite it relative, as TF does within model_dir.
with open(os.path.join(out, "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "model.ckpt-7"\nall_model_checkpoint_paths: "model.ckpt-7"\n')
print(prefix, sorted(expected))
