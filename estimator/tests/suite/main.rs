//! The model suite (`examples/models_bench.rs`, `examples/models/`): every model builds,
//! traces and trains with a finite, falling loss, so the bench cannot rot; and the layers
//! the suite added (conv1d, embedding, global pooling) against references.

#[path = "../support/mod.rs"]
mod support;

mod layers_sequence;
mod models;
