//! Property test: random modules of every op kind compute the same values before and after
//! the full optimization pipeline (interpreter on both), and the pipeline's verifier accepts
//! every intermediate module.

use proptest::prelude::*;
use tessel_compiler::compile::{optimize, CompileOptions};
use tessel_compiler::interpreter::evaluate;
use tessel_compiler::ir::{Array, ArrayData, ElementType, Literal, Module};
use tessel_tests::modgen::ModuleGen;
use tessel_tests::numerics::{compare_literals, CORPUS_TOLERANCE};

fn arguments(m: &Module, seed: u32) -> Vec<Literal> {
    let (params, _) = m.entry_signature();
    params
        .iter()
        .enumerate()
        .map(|(p, s)| {
            let a = s.as_array().unwrap().clone();
            let n = a.element_count() as usize;
            let f = |i: usize| {
                let h = (seed as usize)
                    .wrapping_mul(2654435761)
                    .wrapping_add(i * 7919 + p * 104729);
                ((h % 2000) as f64 - 1000.0) / 400.0
            };
            let data = match a.element_type {
                ElementType::S32 => ArrayData::S32((0..n).map(|i| f(i).round() as i32).collect()),
                _ => ArrayData::from_f64_fn(a.element_type, n, f),
            };
            Literal::Array(Array::new(a, data))
        })
        .collect()
}

fn check(script: Vec<u32>, steps: usize) -> Result<(), TestCaseError> {
    let seed = script.first().copied().unwrap_or(0);
    let m = ModuleGen::new(script).finish(steps);
    if let Err(e) = tessel_compiler::verifier::verify(&m) {
        return Err(TestCaseError::fail(format!(
            "generated module is invalid: {e:?}"
        )));
    }
    let args = arguments(&m, seed);
    let expected = evaluate(&m, &args).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut optimized = m.clone();
    let r = optimize(&mut optimized, &CompileOptions::default())
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    if std::env::var("DEBUG_GEN").is_ok() {
        eprintln!(
            "{} -> {} instrs, kernels {} -> {}, fusions {}",
            r.instructions_before,
            r.instructions_after,
            r.kernels_before,
            r.kernels_after,
            r.fusions
        );
    }
    let actual = evaluate(&optimized, &args)
        .map_err(|e| TestCaseError::fail(format!("optimized module fails: {e}")))?;
    compare_literals(&actual, &expected, CORPUS_TOLERANCE).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn pipeline_preserves_values(script in prop::collection::vec(any::<u32>(), 8..120), steps in 1usize..30) {
        check(script, steps)?;
    }
}
