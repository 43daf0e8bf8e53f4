"""The model suite's five models as TF 2.15 TPUEstimator model_fns (tf.compat.v1, tf.layers).

Each is the TensorFlow twin of the tessel model of the same name; layers, initializers (TF's
defaults unless stated), losses and optimizers are kept the same on both sides. Imported by
models.py, which runs them; this module only builds graphs.
"""
import tensorflow.compat.v1 as tf

CLASSES = 10
TEXT_VOCAB, TEXT_LEN, TEXT_EMBED = 20000, 200, 128


def _training(mode):
    return mode == tf.estimator.ModeKeys.TRAIN


def _spec(mode, loss, logits, labels, optimizer):
    """A TPUEstimatorSpec with the train op run after batch normalization's UPDATE_OPS, and
    accuracy as the evaluation metric."""
    if mode == tf.estimator.ModeKeys.EVAL:
        def metric_fn(labels, logits):
            return {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}
        return tf.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss,
                                                 eval_metrics=(metric_fn, [labels, logits]))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def mnist(features, labels, mode, params):
    """The model_fn of ../shared/peers/tf_tpu_estimator_mnist.py (TPUEstimator's guide), unchanged:
    5x5 same convolutions with bias and ReLU, max pooling, dense 128, dropout 0.4, one-hot softmax
    cross entropy, SGD at 0.01 with exponential decay."""
    input_layer = tf.reshape(features, [-1, 28, 28, 1])
    conv1 = tf.layers.conv2d(input_layer, 32, [5, 5], padding="same", activation=tf.nn.relu)
    pool1 = tf.layers.max_pooling2d(conv1, [2, 2], 2)
    conv2 = tf.layers.conv2d(pool1, 64, [5, 5], padding="same", activation=tf.nn.relu)
    pool2 = tf.layers.max_pooling2d(conv2, [2, 2], 2)
    flat = tf.reshape(pool2, [-1, 7 * 7 * 64])
    dense = tf.layers.dense(flat, 128, activation=tf.nn.relu)
    dropout = tf.layers.dropout(dense, rate=0.4, training=_training(mode))
    logits = tf.layers.dense(dropout, CLASSES)
    onehot = tf.one_hot(tf.cast(labels, tf.int32), CLASSES)
    loss = tf.losses.softmax_cross_entropy(onehot_labels=onehot, logits=logits)
    lr = tf.train.exponential_decay(0.01, tf.train.get_global_step(), 100000, 0.96)
    return _spec(mode, loss, logits, labels, tf.train.GradientDescentOptimizer(lr))


def fashion(features, labels, mode, params):
    """The model of tests/tf/fashion_twin.py (the twin of estimator/examples/fashion_mnist.rs).
    That script trains at import time, so its few layer lines are repeated here rather than
    imported: 3x3 same convolutions without bias, batch normalization (TF's defaults: momentum
    0.99, epsilon 1e-3), ReLU, max pooling; dense 256 ReLU, dropout 0.3, dense 10; Adam at 1e-3
    with cosine decay to 0 over params["decay_steps"]."""
    training = _training(mode)
    h = features
    for filters in (32, 64):
        h = tf.layers.conv2d(h, filters, 3, padding="same", use_bias=False)
        h = tf.nn.relu(tf.layers.batch_normalization(h, training=training))
        h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.layers.flatten(h)
    h = tf.layers.dense(h, 256, activation=tf.nn.relu)
    h = tf.layers.dropout(h, 0.3, training=training)
    logits = tf.layers.dense(h, CLASSES)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    lr = tf.train.cosine_decay(0.001, tf.train.get_global_step(), params["decay_steps"])
    return _spec(mode, loss, logits, labels, tf.train.AdamOptimizer(lr))


def _conv_bn(x, filters, kernel, strides, training):
    x = tf.layers.conv2d(x, filters, kernel, strides=strides, padding="same", use_bias=False)
    return tf.layers.batch_normalization(x, momentum=0.9, epsilon=1e-5, training=training)


def _basic_block(x, filters, strides, training):
    """conv3x3(stride s)-BN-ReLU-conv3x3-BN plus the shortcut (identity, or conv 1x1 stride s + BN
    where the block down-samples and doubles the filters), add, ReLU."""
    y = tf.nn.relu(_conv_bn(x, filters, 3, strides, training))
    y = _conv_bn(y, filters, 3, 1, training)
    shortcut = x if strides == 1 else _conv_bn(x, filters, 1, strides, training)
    return tf.nn.relu(y + shortcut)


def resnet20(features, labels, mode, params):
    """ResNet-20 on [B,32,32,3]: conv3x3 16 + BN + ReLU, three stages of three basic blocks with
    16, 32, 64 filters (stages 2 and 3 start with stride 2), global average pool, dense 10.
    Batch normalization with momentum 0.9 and epsilon 1e-5; momentum SGD (0.1, 0.9), no weight
    decay."""
    training = _training(mode)
    h = tf.nn.relu(_conv_bn(features, 16, 3, 1, training))
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(3):
            strides = 2 if stage > 0 and block == 0 else 1
            h = _basic_block(h, filters, strides, training)
    h = tf.reduce_mean(h, axis=[1, 2])
    logits = tf.layers.dense(h, CLASSES)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return _spec(mode, loss, logits, labels, tf.train.MomentumOptimizer(0.1, 0.9))


def mlp(features, labels, mode, params):
    """784-1024-1024-10 with ReLU and dropout 0.2 after each hidden layer; Adam at 1e-3."""
    training = _training(mode)
    h = features
    for _ in range(2):
        h = tf.layers.dense(h, 1024, activation=tf.nn.relu)
        h = tf.layers.dropout(h, 0.2, training=training)
    logits = tf.layers.dense(h, CLASSES)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return _spec(mode, loss, logits, labels, tf.train.AdamOptimizer(1e-3))


def textcnn(features, labels, mode, params):
    """Token ids [B,200] in 0..20000: embedding 20000x128 (uniform in [-0.05, 0.05]), Conv1D of 128
    filters of width 5 (valid, ReLU), max over time, dense 10; Adam at 1e-3. The embedding's
    gradient reaches Adam as IndexedSlices (TF's sparse update)."""
    table = tf.get_variable("embedding", [TEXT_VOCAB, TEXT_EMBED],
                            initializer=tf.random_uniform_initializer(-0.05, 0.05))
    h = tf.nn.embedding_lookup(table, features)
    h = tf.layers.conv1d(h, 128, 5, padding="valid", activation=tf.nn.relu)
    h = tf.reduce_max(h, axis=1)
    logits = tf.layers.dense(h, CLASSES)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return _spec(mode, loss, logits, labels, tf.train.AdamOptimizer(1e-3))


# name -> (model_fn, default batch)
MODELS = {
    "mnist": (mnist, 128),
    "fashion": (fashion, 128),
    "resnet20": (resnet20, 128),
    "mlp": (mlp, 256),
    "textcnn": (textcnn, 64),
}
