//! Golden cases for constant folding (`tests/golden/passes/constant-folding/`), and the
//! threefry corpus module, whose u64 `iota_2x32_shape` values must fold away.

use tessel_compiler::hlo_text::parse_module_file;
use tessel_compiler::ir::{ElementType, Module, Op};
use tessel_compiler::passes::{CallInliner, ConstantFolding, Dce, Pass};
use tessel_tests::corpus_dir;
use tessel_tests::pass_golden::run_pass_suite;

#[test]
fn golden() {
    run_pass_suite("constant-folding", || Box::new(ConstantFolding::default()));
}

fn count_u64(m: &Module) -> usize {
    m.computations
        .iter()
        .flat_map(|c| c.ids().iter().map(move |&id| c.get(id)))
        .filter(|i| i.shape.element_type() == Some(ElementType::U64))
        .count()
}

#[test]
fn threefry_iota_2x32_folds_to_u32_constants() {
    let path = corpus_dir().unwrap().join("threefry_uniform.hlo");
    let mut m = parse_module_file(&path).unwrap();
    assert!(count_u64(&m) > 0, "the corpus module computes u64 iotas");
    CallInliner.run(&mut m).unwrap();
    assert!(ConstantFolding::default().run(&mut m).unwrap());
    Dce.run(&mut m).unwrap();
    assert_eq!(count_u64(&m), 0, "u64 values left after folding");
    let u32_constants = m
        .entry()
        .ids()
        .iter()
        .filter(|&&id| {
            let i = m.entry().get(id);
            matches!(i.op, Op::Constant(_))
                && i.shape.element_type() == Some(ElementType::U32)
                && i.shape.dims() == [3, 5]
        })
        .count();
    assert_eq!(u32_constants, 2, "the two u32 halves become constants");
}
