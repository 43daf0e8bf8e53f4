//! The optimization passes: golden cases of each pass and of the whole pipeline, buffer
//! assignment, the dump directory, and corpus and random modules computing the same values
//! before and after the pipeline.

mod buffer_assignment;
mod constant_folding;
mod corpus;
mod dump;
mod dump_reproducible;
mod fusion;
mod golden;
mod pipeline;
mod random_modules;
