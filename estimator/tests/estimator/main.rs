//! The estimator: train, evaluate, predict and export; hooks and early stopping; checkpoints, events, resume, shards, warm start and restore, TF-format checkpoints, TF_CONFIG and the evaluator task, a user's mistakes, the Fashion-MNIST example.

#[path = "../support/mod.rs"]
mod support;

mod builtin_hooks;
mod checkpoints;
mod early_stopping;
mod evaluate_whole;
mod evaluator;
mod events;
mod fashion_mnist_example;
mod hooks;
mod model_fn_mistakes;
mod predict_export;
mod profiler_hook;
mod restore_or_warm_start;
mod resume;
mod shards;
mod tf_config;
mod tf_format_checkpoints;
mod warm_start;
