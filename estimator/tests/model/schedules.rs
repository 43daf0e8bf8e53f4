//! Learning-rate schedules against TF's formulas at many steps (staircase boundaries, the
//! end of decay, cycles), on the interpreter and the JIT; argument errors.

use crate::support::assert_close;
use tessel_compiler::ir::Array;
use tessel_estimator::model::schedules::{
    cosine_decay, exponential_decay, piecewise_constant, polynomial_decay, ScheduleError,
};
use tessel_estimator::model::{Graph, Mode};
use tessel_runtime::session::{compile, Device, Outputs};

const STEPS: [i32; 16] = [
    0,
    1,
    2,
    99,
    100,
    101,
    150,
    199,
    200,
    201,
    999,
    1000,
    1001,
    5000,
    123_456,
    i32::MAX,
];

/// The five schedules' values at every step of `STEPS` on `device`.
fn evaluate(device: Device) -> Vec<Vec<f64>> {
    let g = Graph::new("schedules", Mode::Train, None);
    let s = g.global_step.clone();
    let outputs = [
        exponential_decay(0.1, &s, 100, 0.96, false).unwrap(),
        exponential_decay(0.1, &s, 100, 0.5, true).unwrap(),
        piecewise_constant(&s, &[100, 200, 1000], &[1.0, 0.5, 0.25, 0.125]).unwrap(),
        polynomial_decay(0.1, &s, 1000, 0.001, 2.0, false).unwrap(),
        polynomial_decay(0.1, &s, 100, 0.01, 1.0, true).unwrap(),
        cosine_decay(0.1, &s, 1000, 0.1).unwrap(),
    ];
    let refs: Vec<_> = outputs.iter().collect();
    let module = g.tracer.finish(&refs).unwrap();
    let program = compile(&module, &device).unwrap();
    STEPS
        .iter()
        .map(|&step| {
            let inputs = program.bind_ordered(vec![Array::scalar_s32(step)]).unwrap();
            let Outputs::Global(out) = program.run(&inputs).unwrap() else {
                unreachable!()
            };
            out.iter().map(|a| a.data.get_f64(0)).collect()
        })
        .collect()
}

/// TF's formulas; the step and the division are f32 on the device (as in TF), which matters
/// for a floor or ceil right at a boundary.
fn expected(step: i32) -> Vec<f64> {
    let s = step as f32 as f64;
    let div = |a: f64, b: f64| (a as f32 / b as f32) as f64;
    let piecewise = match step {
        i32::MIN..=100 => 1.0,
        101..=200 => 0.5,
        201..=1000 => 0.25,
        _ => 0.125,
    };
    let poly = |lr: f64, end: f64, power: f64, p: f64| (lr - end) * (1.0 - p).powf(power) + end;
    let held = s.min(1000.0);
    let cycle_steps = 100.0 * if s == 0.0 { 1.0 } else { div(s, 100.0).ceil() };
    let cosine = 0.5 * (1.0 + (std::f64::consts::PI * held / 1000.0).cos());
    vec![
        0.1 * (0.96f32 as f64).powf(div(s, 100.0)),
        0.1 * 0.5f64.powf(div(s, 100.0).floor()),
        piecewise,
        poly(0.1, 0.001, 2.0, held / 1000.0),
        poly(0.1, 0.01, 1.0, div(s, cycle_steps)),
        0.1 * ((1.0 - 0.1f32 as f64) * cosine + 0.1f32 as f64),
    ]
}

#[test]
fn schedules_follow_tfs_formulas_on_both_backends() {
    let interp = evaluate(Device::interpreter());
    let jit = evaluate(Device::jit());
    for ((step, a), b) in STEPS.iter().zip(&interp).zip(&jit) {
        let want = expected(*step);
        assert_close(&format!("interpreter at step {step}"), a, &want, 2e-6);
        assert_close(&format!("jit at step {step}"), b, a, 1e-6);
    }
}

#[test]
fn staircase_steps_exactly_at_the_boundary() {
    let rates = evaluate(Device::interpreter());
    let at = |step: i32| rates[STEPS.iter().position(|&s| s == step).unwrap()][1];
    assert_eq!(at(99), 0.1f32 as f64);
    assert_eq!(at(100), 0.05f32 as f64);
    assert_eq!(at(199), 0.05f32 as f64);
    assert_eq!(at(200), 0.025f32 as f64);
}

#[test]
fn bad_arguments_are_errors() {
    let g = Graph::new("bad", Mode::Train, None);
    let s = &g.global_step;
    assert_eq!(
        exponential_decay(0.1, s, 0, 0.9, false).unwrap_err(),
        ScheduleError::DecaySteps(0)
    );
    assert_eq!(
        cosine_decay(0.1, s, -5, 0.0).unwrap_err(),
        ScheduleError::DecaySteps(-5)
    );
    let err = piecewise_constant(s, &[10, 20], &[1.0, 2.0]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "The length of boundaries should be 1 less than the length of values"
    );
    assert_eq!(
        piecewise_constant(s, &[20, 10], &[1.0, 2.0, 3.0]).unwrap_err(),
        ScheduleError::NotIncreasing(vec![20, 10])
    );
    assert_eq!(
        piecewise_constant(s, &[1 << 40], &[1.0, 2.0]).unwrap_err(),
        ScheduleError::BoundaryRange(1 << 40)
    );
}
