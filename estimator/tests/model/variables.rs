//! `get_variable` and `variable_scope` with TF1's names and errors; initial values that do
//! not depend on creation order; the guide model's variables; layer op names and source lines.

use crate::support::guide_model::{guide_logits, guide_loss};
use crate::support::values;
use tessel_compiler::ir::ElementType::{F32, S32};
use tessel_estimator::model::layers::{dense, Dense};
use tessel_estimator::model::{
    get_variable, variable_scope, Graph, Initializer, Mode, Reuse, VariableError,
};
use tessel_runtime::session::{compile, Device};

#[test]
fn a_second_variable_of_one_name_is_tf_s_error() {
    let mut g = Graph::new("v", Mode::Train, Some(1));
    get_variable(&mut g, "w", &[2], F32, Initializer::Zeros, true).unwrap();
    let e = get_variable(&mut g, "w", &[2], F32, Initializer::Zeros, true).unwrap_err();
    assert_eq!(e, VariableError::AlreadyExists { name: "w".into() });
    assert!(e
        .to_string()
        .starts_with("Variable w already exists, disallowed. Did you mean to set reuse=True"));
    // A second dense layer gets its own name, so no clash.
    let x = g.tracer.parameter("x", &[1, 3], F32);
    dense(&mut g, &x, 2, Dense::default()).unwrap();
    dense(&mut g, &x, 2, Dense::default()).unwrap();
    // Naming a layer twice is the same error.
    let named = || Dense {
        name: Some("head".into()),
        ..Dense::default()
    };
    dense(&mut g, &x, 2, named()).unwrap();
    let e = dense(&mut g, &x, 2, named()).unwrap_err();
    assert!(
        e.to_string()
            .contains("Variable head/kernel already exists"),
        "{e}"
    );
}

#[test]
fn variable_scopes_prefix_names_and_share_on_reuse() {
    let mut g = Graph::new("v", Mode::Train, Some(1));
    let a = variable_scope(&mut g, "tower", Reuse::Inherit, |g| {
        get_variable(g, "w", &[3], F32, Initializer::Ones, true).unwrap()
    });
    assert!(g.variables.find("tower/w").is_some());
    let b = variable_scope(&mut g, "tower", Reuse::Yes, |g| {
        // Inner scopes inherit reuse.
        variable_scope(g, "inner", Reuse::Inherit, |g| {
            assert!(matches!(
                get_variable(g, "w", &[3], F32, Initializer::Ones, true),
                Err(VariableError::DoesNotExist { .. })
            ));
        });
        get_variable(g, "w", &[3], F32, Initializer::Ones, true).unwrap()
    });
    assert_eq!(a.id(), b.id());
    let e = variable_scope(&mut g, "tower", Reuse::Auto, |g| {
        get_variable(g, "new", &[1], F32, Initializer::Zeros, false).unwrap();
        get_variable(g, "w", &[4], F32, Initializer::Ones, true).unwrap_err()
    });
    assert!(
        e.to_string()
            .contains("Trying to share variable tower/w, but specified shape [4]"),
        "{e}"
    );
    assert!(
        !g.variables
            .get(g.variables.find("tower/new").unwrap())
            .trainable
    );
    // Layers inside a scope: variables and ops both under it.
    let x = g.tracer.parameter("x", &[1, 3], F32);
    variable_scope(&mut g, "head", Reuse::Inherit, |g| {
        dense(g, &x, 2, Dense::default()).unwrap()
    });
    assert!(g.variables.find("head/dense/kernel").is_some());
    let bad = get_variable(&mut g, "i", &[2], S32, Initializer::GlorotUniform, true).unwrap_err();
    assert!(matches!(bad, VariableError::Initializer(_)), "{bad}");
}

#[test]
fn initial_values_depend_on_seed_and_name_not_creation_order() {
    let make = |names: &[&str], seed| {
        let mut g = Graph::new("v", Mode::Train, seed);
        for n in names {
            get_variable(&mut g, n, &[4, 3], F32, Initializer::GlorotUniform, true).unwrap();
        }
        let values = g.variables.initial_values().unwrap();
        let mut named: Vec<_> = g
            .variables
            .all()
            .map(|(_, v)| v.name.clone())
            .zip(values)
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        named
    };
    assert_eq!(make(&["a", "b"], Some(7)), make(&["b", "a"], Some(7)));
    assert_ne!(make(&["a", "b"], Some(7)), make(&["a", "b"], Some(8)));
    // No seed: the process seed, the same for every graph of this process.
    assert_eq!(make(&["a"], None), make(&["a"], None));
}

#[test]
fn the_guide_model_has_tf_s_variable_names_shapes_and_op_names() {
    let mut g = Graph::new("mnist", Mode::Train, Some(1));
    let features = g.tracer.parameter("features", &[128, 784], F32);
    let labels = g.tracer.parameter("labels", &[128], S32);
    let logits = guide_logits(&mut g, &features).unwrap();
    let loss = guide_loss(&logits, &labels);
    let vars: Vec<(String, Vec<i64>)> = g
        .variables
        .all()
        .map(|(_, v)| (v.name.clone(), v.dims.clone()))
        .collect();
    let expected = [
        ("conv2d/kernel", vec![5, 5, 1, 32]),
        ("conv2d/bias", vec![32]),
        ("conv2d_1/kernel", vec![5, 5, 32, 64]),
        ("conv2d_1/bias", vec![64]),
        ("dense/kernel", vec![3136, 128]),
        ("dense/bias", vec![128]),
        ("dense_1/kernel", vec![128, 10]),
        ("dense_1/bias", vec![10]),
    ];
    let expected: Vec<(String, Vec<i64>)> = expected
        .into_iter()
        .map(|(n, d)| (n.to_string(), d))
        .collect();
    assert_eq!(vars, expected);
    let params: Vec<_> = g.variables.all().map(|(_, v)| v.tensor.clone()).collect();
    let refs: Vec<_> = params.iter().collect();
    let grads = g.tracer.grad(&loss, &refs);
    let init = g.variables.initial_values().unwrap();
    let mut outs = vec![&loss, &logits];
    outs.extend(grads.iter());
    let module = g.tracer.finish(&outs).expect("traces");
    // Op names are scoped by layer, and point at the model_fn's lines (not the layers').
    let entry = module.computation(module.entry);
    let metas: Vec<_> = entry
        .ids()
        .iter()
        .map(|&id| entry.get(id).metadata.clone())
        .collect();
    let named = |name: &str| {
        metas
            .iter()
            .find(|m| m.op_name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no op {name}"))
    };
    let conv = named("conv2d_1/convolution");
    assert!(
        conv.source
            .as_ref()
            .unwrap()
            .file
            .ends_with("guide_model.rs"),
        "{conv:?}"
    );
    named("dense/dot");
    named("max_pooling2d_1/reduce-window");
    assert!(metas.iter().any(|m| m
        .op_name
        .as_deref()
        .is_some_and(|n| n.starts_with("dropout/random_bits/"))));
    // Compiles and runs on the JIT at batch 128.
    let program = compile(&module, &Device::jit()).expect("compiles on the JIT");
    let x = crate::support::random_array(&[128, 784], F32, 1);
    let y = tessel_compiler::ir::Array::new(
        tessel_compiler::ir::ArrayShape::new(S32, &[128]),
        tessel_compiler::ir::ArrayData::S32((0..128).map(|i| i % 10).collect()),
    );
    let mut args = vec![crate::support::scalar_step(0), x, y];
    args.extend(init);
    let out = match program
        .run(&program.bind_ordered(args.clone()).unwrap())
        .unwrap()
    {
        tessel_runtime::session::Outputs::Global(v) => v,
        _ => unreachable!(),
    };
    let loss = values(&out[0])[0];
    // Glorot-initialized logits are small: the loss is near ln(10).
    assert!((loss - 10f64.ln()).abs() < 0.5, "{loss}");
    assert_eq!(out.len(), 2 + 8);
    assert!(out.iter().all(|a| values(a).iter().all(|v| v.is_finite())));
}
