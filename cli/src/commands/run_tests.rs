//! Tests of `tessel run` through its `execute`: per-replica inputs, and bad files explained.
use super::*;
use tessel_compiler::ir::Array;
use tessel_runtime::host_io::write_safetensors;

fn f(v: &[f32]) -> Array {
    Array::f32(&[v.len() as i64], v.to_vec())
}

#[test]
fn backends_are_named() {
    assert_eq!(parse_backend("interp"), Ok(Backend::Interpreter));
    assert_eq!(parse_backend("jit"), Ok(Backend::Jit));
    assert!(parse_backend("gpu").unwrap_err().contains("gpu"));
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessel-run-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn args(file: PathBuf, inputs: PathBuf, outputs: PathBuf, replicas: usize) -> RunArgs {
    RunArgs {
        file,
        inputs,
        outputs,
        backend: "interp".into(),
        replicas,
        loop_iterations: None,
        infeed: vec![],
        repeat: None,
        nan_check: false,
        infeed_depth: None,
        profile: false,
        profile_rows: 30,
        conv_algorithm: ConvAlgorithm::Auto,
        trace_dir: None,
        fast_allreduce: false,
    }
}

#[test]
fn per_replica_module_reads_shared_and_overridden_inputs() {
    let dir = temp_dir("replicas");
    let hlo = dir.join("m.hlo");
    std::fs::write(
        &hlo,
        "HloModule per_replica\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
         ENTRY main {\n  x = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(x), replica_groups={}, to_apply=add\n}\n",
    )
    .unwrap();
    let inputs = dir.join("in.safetensors");
    write_safetensors(
        &inputs,
        &[("0".into(), f(&[1., 2.])), ("1/0".into(), f(&[10., 20.]))],
    )
    .unwrap();
    let outputs = dir.join("out.safetensors");
    for backend in ["interp", "jit"] {
        let mut run = args(hlo.clone(), inputs.clone(), outputs.clone(), 2);
        run.backend = backend.into();
        execute(&run).unwrap();
        let mut out = read_safetensors(&outputs).unwrap();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            out,
            vec![
                ("0/0".into(), f(&[11., 22.])),
                ("1/0".into(), f(&[11., 22.]))
            ],
            "{backend}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_files_are_explained() {
    let dir = temp_dir("bad");
    let hlo = dir.join("m.hlo");
    std::fs::write(
        &hlo,
        "HloModule m\n\nENTRY main {\n  ROOT x = f32[2] parameter(0)\n}\n",
    )
    .unwrap();
    let not_tensors = dir.join("in.safetensors");
    std::fs::write(&not_tensors, b"not a tensor file").unwrap();
    let out = dir.join("out.safetensors");
    let e = execute(&args(hlo.clone(), not_tensors, out.clone(), 1)).unwrap_err();
    assert!(e.contains("not a safetensors file"), "{e}");
    let garbage = dir.join("bad.hlo");
    std::fs::write(&garbage, "HloModule m\nENTRY {").unwrap();
    let inputs = dir.join("ok.safetensors");
    write_safetensors(&inputs, &[("0".into(), f(&[1., 2.]))]).unwrap();
    assert!(execute(&args(garbage, inputs.clone(), out.clone(), 1)).is_err());
    let mut looped = args(hlo.clone(), inputs.clone(), out.clone(), 1);
    looped.loop_iterations = Some(3);
    looped.infeed = vec![7];
    let e = execute(&looped).unwrap_err();
    assert!(e.contains('7'), "{e}");
    execute(&args(hlo, inputs, out.clone(), 1)).unwrap();
    assert_eq!(
        read_safetensors(&out).unwrap(),
        vec![("0".into(), f(&[1., 2.]))]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
