//! Building a model_fn: layers and their gradients, variables, optimizers, schedules, losses, metrics, device randomness, CrossShardOptimizer.

#[path = "../support/mod.rs"]
mod support;

mod cross_shard;
mod device_random;
mod layers_forward;
mod layers_gradients;
mod losses;
mod metrics;
mod optimizers;
mod schedules;
mod tf_layers_dump;
mod variables;
