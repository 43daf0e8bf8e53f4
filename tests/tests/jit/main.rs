//! The JIT on one replica against the interpreter and JAX: hand-built modules, the corpus,
//! random graphs, gather and scatter (and their row paths), the convolution routines (direct, Winograd, 1-D Winograd, patch
//! GEMM), the fast paths, kernels split over threads, vector math, and in-place `while`
//! updates.

mod arena_plan;
mod basic;
mod batch_norm_fusion;
mod conv_bias;
mod conv_check;
mod conv_direct;
mod conv_pair;
mod conv_phase;
mod conv_pool;
mod conv_strided_wgrad;
mod corpus;
mod fast_paths;
mod fold;
mod gather_scatter;
mod gemm_backends;
mod long_programs;
mod low_precision_topk;
mod parallel_kernels;
mod pool_choices;
mod pool_gradient_fusion;
mod pool_routines;
mod random_bits;
mod random_graphs;
mod reduce_parallel;
mod row_gather_scatter;
mod thread_counts;
mod vector_math;
mod while_in_place;
mod winograd;
mod winograd_1d;
mod zero_size;
