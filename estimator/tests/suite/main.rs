//! The model suite (`examples/models_bench.rs`, `examples/models/`): every model builds,
//! traces and trains with a finite, falling loss, so the bench cannot rot; and the layers
//! the suite added (conv1d, embedding, global pooling) against references; and the
//! accuracy runs' data.

#[path = "../support/mod.rs"]
mod support;

mod accuracy;
mod layers_sequence;
mod models;
