//! TF1's `get_variable` and `variable_scope`: variables named by the scopes they are made in,
//! with TF's refusal to make a name twice unless the scope reuses.

use super::graph::Graph;
use super::initializers::{check, initial_value, InitializerError};
use super::random::resolve_seed;
use super::variables::{Initializer, VariableStore};
use tessel_compiler::ir::{Array, ElementType};
use tessel_compiler::trace::Tensor;

/// A variable scope's `reuse` (TF's `reuse=None | True | tf.AUTO_REUSE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reuse {
    /// Takes the enclosing scope's setting (TF's `None`); at top level, variables are new.
    #[default]
    Inherit,
    /// Variables must exist already (TF's `reuse=True`).
    Yes,
    /// Existing variables are returned, missing ones created (TF's `tf.AUTO_REUSE`).
    Auto,
}

/// Why `get_variable` refused. The messages keep TF's wording so that they can be searched.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VariableError {
    #[error("Variable {name} already exists, disallowed. Did you mean to set reuse=True or reuse=tf.AUTO_REUSE in VarScope? (here: open the scope with `variable_scope(g, name, Reuse::Yes | Reuse::Auto, ..)` to share it, or give the layer another name)")]
    AlreadyExists { name: String },
    #[error("Variable {name} does not exist, or was not created with tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in VarScope? (here: the scope has `Reuse::Yes`, which only shares existing variables)")]
    DoesNotExist { name: String },
    #[error("Trying to share variable {name}, but specified shape {wanted:?} {wanted_type} and found shape {found:?} {found_type}.")]
    ShapeMismatch {
        name: String,
        wanted: Vec<i64>,
        wanted_type: ElementType,
        found: Vec<i64>,
        found_type: ElementType,
    },
    #[error(transparent)]
    Initializer(#[from] InitializerError),
}

/// The effective reuse of the innermost scope (`Inherit` all the way up means "create").
fn effective_reuse(g: &Graph) -> Reuse {
    g.variable_scopes
        .iter()
        .rev()
        .map(|(_, r)| *r)
        .find(|r| *r != Reuse::Inherit)
        .unwrap_or(Reuse::Inherit)
}

/// The full name of `name` in the open variable scopes (`tower/dense/kernel`).
pub(crate) fn scoped_name(g: &Graph, name: &str) -> String {
    let mut parts: Vec<&str> = g.variable_scopes.iter().map(|(s, _)| s.as_str()).collect();
    parts.push(name);
    parts.join("/")
}

/// TF1's `tf.get_variable`: the variable `name` (prefixed by the open variable scopes) of
/// this shape and type, created with `initializer` or, when the scope reuses, the existing
/// one. Its tensor is the variable's value at the start of the step.
pub fn get_variable(
    g: &mut Graph,
    name: &str,
    dims: &[i64],
    element_type: ElementType,
    initializer: Initializer,
    trainable: bool,
) -> Result<Tensor, VariableError> {
    let full = scoped_name(g, name);
    let reuse = effective_reuse(g);
    if let Some(id) = g.variables.find(&full) {
        if reuse == Reuse::Inherit {
            return Err(VariableError::AlreadyExists { name: full });
        }
        let v = g.variables.get(id);
        if v.dims != dims || v.element_type != element_type {
            return Err(VariableError::ShapeMismatch {
                name: full,
                wanted: dims.to_vec(),
                wanted_type: element_type,
                found: v.dims.clone(),
                found_type: v.element_type,
            });
        }
        return Ok(v.tensor.clone());
    }
    if reuse == Reuse::Yes {
        return Err(VariableError::DoesNotExist { name: full });
    }
    check(&initializer, &full, dims, element_type)?;
    // Variables are named by variable scopes alone; name scopes only prefix ops.
    let scopes = g.tracer.take_scopes();
    let id = g.variables.push(
        &mut g.tracer,
        &full,
        dims,
        element_type,
        initializer,
        trainable,
    );
    g.tracer.restore_scopes(scopes);
    Ok(g.variables.get(id).tensor.clone())
}

/// TF1's `tf.variable_scope(name, reuse=..)`: runs `f` with variables named `name/...` and
/// ops in the name scope `name`.
pub fn variable_scope<R>(
    g: &mut Graph,
    name: &str,
    reuse: Reuse,
    f: impl FnOnce(&mut Graph) -> R,
) -> R {
    g.variable_scopes.push((name.to_string(), reuse));
    g.tracer.push_scope(name);
    let result = f(g);
    g.tracer.pop_scope();
    g.variable_scopes.pop();
    result
}

impl VariableStore {
    /// Every variable's initial value, in creation order (the order of their entry
    /// parameters), from `tf_random_seed` or the process seed.
    pub fn initial_values(&self) -> Result<Vec<Array>, InitializerError> {
        let seed = resolve_seed(self.seed());
        self.all()
            .map(|(_, v)| initial_value(&v.initializer, &v.name, &v.dims, v.element_type, seed))
            .collect()
    }
}
