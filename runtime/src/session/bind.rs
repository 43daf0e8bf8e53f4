//! Binding inputs to a program's parameters. Inputs are keyed by parameter number (`"0"`,
//! `"1"`, ...); a per-replica program also takes `"R/I"`, replica R's own value of parameter I
//! (overriding `"I"`, which every replica shares). Every mismatch is a [`BindError`] naming the
//! input and the parameter.

use super::error::{shape_text, BindError};
use tessel_compiler::ir::{Array, ArrayShape, Module, Shape};

/// One entry parameter: its name and array shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub shape: ArrayShape,
}

/// The entry's parameters, in order; each must be an array.
pub(crate) fn entry_parameters(module: &Module) -> Result<Vec<Parameter>, BindError> {
    let e = module.entry();
    e.parameters()
        .into_iter()
        .enumerate()
        .map(|(index, id)| {
            let p = e.get(id);
            match &p.shape {
                Shape::Array(a) => Ok(Parameter {
                    name: p.name.clone(),
                    shape: a.clone(),
                }),
                other => Err(BindError::NotAnArray {
                    index,
                    name: p.name.clone(),
                    shape: other.to_text(false),
                }),
            }
        })
        .collect()
}

/// Inputs keyed "0".."N-1", one per parameter, each of the parameter's shape; in parameter
/// order.
pub(crate) fn bind_inputs(
    params: &[Parameter],
    inputs: Vec<(String, Array)>,
) -> Result<Vec<Array>, BindError> {
    let mut slots: Vec<Option<Array>> = vec![None; params.len()];
    for (key, a) in inputs {
        let i = parameter_index(&key, &key, params)?;
        check_input(&key, &a, i, &params[i])?;
        slots[i] = Some(a);
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, s)| s.ok_or_else(|| missing(i, &params[i], None)))
        .collect()
}

/// Per-replica inputs: `"I"` for every replica, `"R/I"` overriding it for replica R;
/// `[r]` is replica r's arguments in parameter order.
pub(crate) fn bind_replica_inputs(
    params: &[Parameter],
    inputs: Vec<(String, Array)>,
    replicas: usize,
) -> Result<Vec<Vec<Array>>, BindError> {
    let mut shared: Vec<Option<Array>> = vec![None; params.len()];
    let mut own: Vec<Vec<Option<Array>>> = vec![vec![None; params.len()]; replicas];
    for (key, a) in inputs {
        let (replica, index) = match key.split_once('/') {
            Some((r, i)) => (Some(r), i),
            None => (None, key.as_str()),
        };
        let i = parameter_index(&key, index, params)?;
        check_input(&key, &a, i, &params[i])?;
        match replica {
            None => shared[i] = Some(a),
            Some(r) => {
                let r = r
                    .parse::<usize>()
                    .ok()
                    .filter(|&r| r < replicas)
                    .ok_or_else(|| BindError::NoSuchReplica {
                        key: key.clone(),
                        replicas,
                    })?;
                own[r][i] = Some(a);
            }
        }
    }
    own.into_iter()
        .enumerate()
        .map(|(r, slots)| {
            slots
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    s.or_else(|| shared[i].clone())
                        .ok_or_else(|| missing(i, &params[i], Some(r)))
                })
                .collect()
        })
        .collect()
}

fn missing(index: usize, p: &Parameter, replica: Option<usize>) -> BindError {
    BindError::Missing {
        key: index.to_string(),
        index,
        name: p.name.clone(),
        shape: shape_text(&p.shape),
        replica,
    }
}

fn check_input(key: &str, a: &Array, index: usize, p: &Parameter) -> Result<(), BindError> {
    if a.shape.element_type != p.shape.element_type || a.shape.dims != p.shape.dims {
        return Err(BindError::Mismatch {
            key: key.to_string(),
            index,
            name: p.name.clone(),
            want: shape_text(&p.shape),
            got: shape_text(&a.shape),
        });
    }
    Ok(())
}

/// The parameter number `index` names in input `key`, or an error listing the parameters.
fn parameter_index(key: &str, index: &str, params: &[Parameter]) -> Result<usize, BindError> {
    index
        .parse::<usize>()
        .ok()
        .filter(|&i| i < params.len())
        .ok_or_else(|| BindError::Extra {
            key: key.to_string(),
            count: params.len(),
            parameters: params
                .iter()
                .enumerate()
                .map(|(i, p)| format!("\"{i}\": {} {}", p.name, shape_text(&p.shape)))
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessel_compiler::ir::ElementType;

    fn params() -> Vec<Parameter> {
        vec![
            Parameter {
                name: "w.1".into(),
                shape: ArrayShape::new(ElementType::F32, &[2]),
            },
            Parameter {
                name: "x.1".into(),
                shape: ArrayShape::new(ElementType::S32, &[]),
            },
        ]
    }

    fn f(v: &[f32]) -> Array {
        Array::f32(&[v.len() as i64], v.to_vec())
    }

    #[test]
    fn inputs_are_matched_by_parameter_number() {
        let got = bind_inputs(
            &params(),
            vec![
                ("1".into(), Array::scalar_s32(3)),
                ("0".into(), f(&[1., 2.])),
            ],
        )
        .unwrap();
        assert_eq!(got, vec![f(&[1., 2.]), Array::scalar_s32(3)]);
    }

    #[test]
    fn missing_extra_and_mismatched_inputs_are_explained() {
        let e = bind_inputs(&params(), vec![("0".into(), f(&[1., 2.]))]).unwrap_err();
        assert!(matches!(e, BindError::Missing { index: 1, .. }), "{e}");
        assert!(
            e.to_string().contains("missing input \"1\"") && e.to_string().contains("x.1"),
            "{e}"
        );
        let e = bind_inputs(
            &params(),
            vec![
                ("0".into(), f(&[1., 2.])),
                ("1".into(), Array::scalar_s32(3)),
                ("2".into(), f(&[1.])),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("extra input \"2\""), "{e}");
        let e = bind_inputs(&params(), vec![("0".into(), f(&[1., 2., 3.]))]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "input \"0\": parameter 0 (w.1) expects f32[2], got f32[3]"
        );
        let e = bind_inputs(&params(), vec![("1".into(), Array::scalar_f32(3.))]).unwrap_err();
        assert!(matches!(e, BindError::Mismatch { index: 1, .. }), "{e}");
    }

    #[test]
    fn replica_inputs_override_shared_ones() {
        let got = bind_replica_inputs(
            &params(),
            vec![
                ("0".into(), f(&[1., 2.])),
                ("1".into(), Array::scalar_s32(0)),
                ("1/1".into(), Array::scalar_s32(7)),
            ],
            2,
        )
        .unwrap();
        assert_eq!(got[0][1], Array::scalar_s32(0));
        assert_eq!(got[1][1], Array::scalar_s32(7));
        assert_eq!(got[1][0], f(&[1., 2.]));
        let e = bind_replica_inputs(&params(), vec![("5/0".into(), f(&[1., 2.]))], 2).unwrap_err();
        assert!(
            matches!(e, BindError::NoSuchReplica { replicas: 2, .. }),
            "{e}"
        );
        let e = bind_replica_inputs(&params(), vec![("0".into(), f(&[1., 2.]))], 2).unwrap_err();
        assert!(e.to_string().contains("(or \"0/1\")"), "{e}");
    }
}
