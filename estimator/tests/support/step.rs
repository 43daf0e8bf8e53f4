//! Running a traced [`tessel_estimator::model::Graph`]'s step on the interpreter or the JIT, for the optimizer tests.
//!
//! The step module's parameters are the graph's entry parameters (global step, then any
//! data parameters, then the variables); its outputs are every variable's value after the
//! step, then the next global step. `Step::run` feeds the outputs back as the next inputs.

use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Module};
use tessel_compiler::trace::Tracer;
use tessel_estimator::model::{Graph, Initializer, Variable};
use tessel_runtime::session::{compile, Device, Outputs};

/// A finished step: the module, the variables' names and initial values.
pub struct Step {
    pub module: Module,
    pub names: Vec<String>,
    pub initial: Vec<Array>,
    /// Entry parameters before the variables (the global step and data).
    pub leading: usize,
}

/// The initial value of a variable whose initializer is deterministic.
pub fn initial_value(v: &Variable) -> Array {
    let shape = ArrayShape::new(v.element_type, &v.dims);
    let n = shape.element_count() as usize;
    let fill = |x: f64| {
        Array::new(
            shape.clone(),
            ArrayData::from_f64_fn(v.element_type, n, |_| x),
        )
    };
    match &v.initializer {
        Initializer::Zeros => fill(0.0),
        Initializer::Ones => fill(1.0),
        Initializer::Constant(c) => fill(*c),
        Initializer::Value(a) => a.clone(),
        other => panic!("test variables use deterministic initializers, not {other:?}"),
    }
}

/// Finishes `g` into a step module: outputs are the variables, then the next step.
pub fn finish(g: Graph) -> Step {
    finish_with(g, false)
}

/// Finishes `g` with the next global step as its first output (then the variables): the
/// carried outputs in parameter order, as a compiled loop wants them.
pub fn finish_for_loop(g: Graph) -> Step {
    finish_with(g, true)
}

fn finish_with(mut g: Graph, step_first: bool) -> Step {
    let vars: Vec<_> = g.variables.all().map(|(id, v)| (id, v.clone())).collect();
    let mut outputs: Vec<_> = vars.iter().map(|(id, _)| g.value_after_step(*id)).collect();
    if step_first {
        outputs.insert(0, g.next_global_step());
    } else {
        outputs.push(g.next_global_step());
    }
    let tracer = std::mem::replace(&mut g.tracer, Tracer::new("unused"));
    let refs: Vec<_> = outputs.iter().collect();
    let module = tracer.finish(&refs).expect("the step traces");
    let leading = module.entry().parameters().len() - vars.len();
    Step {
        module,
        names: vars.iter().map(|(_, v)| v.name.clone()).collect(),
        initial: vars.iter().map(|(_, v)| initial_value(v)).collect(),
        leading,
    }
}

pub fn f32s(a: &Array) -> Vec<f64> {
    (0..a.len()).map(|i| a.data.get_f64(i)).collect()
}

impl Step {
    /// Runs `steps` steps from the initial values on one replica with the leading
    /// parameters `data` (after the global step); returns the variables after each step
    /// and the final global step.
    pub fn run(&self, device: Device, data: &[Array], steps: usize) -> (Vec<Vec<Array>>, i32) {
        let program = compile(&self.module, &device).expect("the step compiles");
        let mut vars = self.initial.clone();
        let mut step = 0i32;
        let mut history = Vec::new();
        for _ in 0..steps {
            let mut args = vec![Array::scalar_s32(step)];
            args.extend(data.iter().cloned());
            args.extend(vars.iter().cloned());
            let inputs = program.bind_ordered(args).expect("inputs bind");
            let Outputs::Global(mut out) = program.run(&inputs).expect("the step runs") else {
                panic!("one replica gives global outputs");
            };
            let next = out.pop().expect("the next global step");
            step = next.data.get_i64(0) as i32;
            vars = out;
            history.push(vars.clone());
        }
        (history, step)
    }

    /// Runs `steps` steps on `data.len()` replicas, replica r fed `data[r]`; returns each
    /// replica's variables after the last step.
    pub fn run_replicated(
        &self,
        device: Device,
        data: &[Vec<Array>],
        steps: usize,
    ) -> Vec<Vec<Array>> {
        let replicas = data.len();
        let program = compile(&self.module, &device.with_replicas(replicas)).expect("compiles");
        let mut vars: Vec<Vec<Array>> = vec![self.initial.clone(); replicas];
        for step in 0..steps {
            let mut keyed = vec![("0".to_string(), Array::scalar_s32(step as i32))];
            for (r, (d, v)) in data.iter().zip(&vars).enumerate() {
                for (i, a) in d.iter().chain(v.iter()).enumerate() {
                    // A one-replica program takes plain keys.
                    let key = match replicas {
                        1 => format!("{}", i + 1),
                        _ => format!("{r}/{}", i + 1),
                    };
                    keyed.push((key, a.clone()));
                }
            }
            let inputs = program.bind(keyed).expect("inputs bind");
            let out = match program.run(&inputs).expect("the step runs") {
                Outputs::PerReplica(out) => out,
                Outputs::Global(leaves) => vec![leaves],
            };
            vars = out
                .into_iter()
                .map(|mut leaves| {
                    assert_eq!(leaves.pop().unwrap().data.get_i64(0), step as i64 + 1);
                    leaves
                })
                .collect();
        }
        vars
    }
}

pub fn f32_array(dims: &[i64], values: &[f64]) -> Array {
    Array::f32(dims, values.iter().map(|&v| v as f32).collect())
}

pub const F32: ElementType = ElementType::F32;
