//! One compiled program on N replicas: collectives against the interpreter, faults on one
//! replica stopping the others, and the data-parallel corpus modules against JAX.

mod all_to_all;
mod combined;
mod corpus;
mod jit;
mod numbering;
mod reuse;
