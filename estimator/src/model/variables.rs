//! Variables by name, as TF1's `get_variable` makes them.
//!
//! A variable is an entry parameter of the traced step, with a name (`conv2d/kernel`), a
//! static shape, an initializer run on the host, and a `trainable` flag. Its initial value is
//! a pure function of `tf_random_seed` and its name, so creating variables in another order
//! does not change any of them, and two runs with one seed start from the same values.

use tessel_compiler::ir::{Array, ElementType};
use tessel_compiler::trace::{Tensor, Tracer};

/// A variable's index in its store (creation order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VariableId(pub usize);

/// How a variable's first value is made (TF's initializers).
#[derive(Clone, Debug, PartialEq)]
pub enum Initializer {
    Zeros,
    Ones,
    Constant(f64),
    /// TF's default for `tf.layers` kernels: uniform in ±sqrt(6 / (fan_in + fan_out)).
    GlorotUniform,
    /// Normal with this mean and stddev, redrawn beyond two stddevs (`truncated_normal_initializer`).
    TruncatedNormal {
        mean: f64,
        stddev: f64,
    },
    RandomNormal {
        mean: f64,
        stddev: f64,
    },
    RandomUniform {
        min: f64,
        max: f64,
    },
    /// A given value (its shape must be the variable's).
    Value(Array),
}

/// One variable of the store.
#[derive(Clone)]
pub struct Variable {
    pub name: String,
    pub dims: Vec<i64>,
    pub element_type: ElementType,
    pub initializer: Initializer,
    pub trainable: bool,
    /// The entry parameter that holds the variable's value before the step.
    pub tensor: Tensor,
}

/// The variables of one graph, in creation order.
pub struct VariableStore {
    seed: Option<i64>,
    variables: Vec<Variable>,
}

impl VariableStore {
    pub fn new(seed: Option<i64>) -> VariableStore {
        VariableStore {
            seed,
            variables: Vec::new(),
        }
    }

    /// The graph-level seed (`RunConfig::tf_random_seed`).
    pub fn seed(&self) -> Option<i64> {
        self.seed
    }

    /// The variable called `name`, if one was created.
    pub fn find(&self, name: &str) -> Option<VariableId> {
        self.variables
            .iter()
            .position(|v| v.name == name)
            .map(VariableId)
    }

    pub fn get(&self, id: VariableId) -> &Variable {
        &self.variables[id.0]
    }

    /// Every variable, in creation order (also the order of their entry parameters).
    pub fn all(&self) -> impl Iterator<Item = (VariableId, &Variable)> {
        self.variables
            .iter()
            .enumerate()
            .map(|(i, v)| (VariableId(i), v))
    }

    /// Adds a variable as the tracer's next entry parameter. The caller has checked that
    /// the name is new (TF's "Variable X already exists" is raised by `get_variable`).
    pub fn push(
        &mut self,
        tracer: &mut Tracer,
        name: &str,
        dims: &[i64],
        element_type: ElementType,
        initializer: Initializer,
        trainable: bool,
    ) -> VariableId {
        let tensor = tracer.parameter(name, dims, element_type);
        self.variables.push(Variable {
            name: name.to_string(),
            dims: dims.to_vec(),
            element_type,
            initializer,
            trainable,
            tensor,
        });
        VariableId(self.variables.len() - 1)
    }
}
