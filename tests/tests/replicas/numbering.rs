//! Device numbering as XLA's: a per-replica module runs as N replicas of one partition, a
//! shard_map body as one replica of N partitions. `replica-id`, `partition-id`, the replica
//! groups of each group mode and collective-permute's pairs must name the same devices on the
//! interpreter and the JIT.

use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::ir::{Array, ArrayData, ArrayShape, ElementType, Literal};
use tessel_runtime::jit::{compile, JitOptions};
use tessel_runtime::replicas::{evaluate_on_devices, Numbering, ReplicaOptions};

/// Each of 4 devices' result as f32s, on the interpreter and the JIT (which must agree).
fn run(text: &str, numbering: Numbering) -> Vec<Vec<f64>> {
    let module = parse_module(text, None).unwrap_or_else(|e| panic!("{e}"));
    let args: Vec<Vec<Literal>> = (0..4)
        .map(|d| {
            vec![Literal::Array(Array::new(
                ArrayShape::new(ElementType::F32, &[1]),
                ArrayData::F32(vec![(d + 1) as f32]),
            ))]
        })
        .collect();
    let flat = |outs: Vec<Literal>| -> Vec<Vec<f64>> {
        outs.iter()
            .map(|l| {
                l.leaves()
                    .iter()
                    .flat_map(|a| (0..a.len()).map(|i| a.data.get_f64(i)).collect::<Vec<_>>())
                    .collect()
            })
            .collect()
    };
    let interpreted = flat(evaluate_on_devices(&module, args.clone(), numbering, None).unwrap());
    let exe = compile(&module, &JitOptions::default()).unwrap();
    let options = ReplicaOptions {
        numbering,
        ..ReplicaOptions::default()
    };
    let compiled = flat(exe.run_replicated_with(args, &options).unwrap());
    assert_eq!(interpreted, compiled, "interpreter and JIT");
    interpreted
}

const IDS: &str = r#"HloModule ids
ENTRY e {
  p = f32[1] parameter(0)
  r = u32[] replica-id()
  q = u32[] partition-id()
  rf = f32[] convert(r)
  qf = f32[] convert(q)
  ROOT t = (f32[], f32[]) tuple(rf, qf)
}
"#;

#[test]
fn partition_id_is_the_mesh_index_in_a_shard_map_body() {
    let ids = |n| run(IDS, n);
    assert_eq!(
        ids(Numbering::Partitions),
        vec![
            vec![0.0, 0.0],
            vec![0.0, 1.0],
            vec![0.0, 2.0],
            vec![0.0, 3.0]
        ]
    );
    assert_eq!(
        ids(Numbering::Replicas),
        vec![
            vec![0.0, 0.0],
            vec![1.0, 0.0],
            vec![2.0, 0.0],
            vec![3.0, 0.0]
        ]
    );
}

fn all_reduce(attrs: &str) -> String {
    format!(
        r#"HloModule ar
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  p = f32[1] parameter(0)
  ROOT r = f32[1] all-reduce(p), {attrs}, to_apply=add
}}
"#
    )
}

#[test]
fn replica_groups_follow_the_group_mode() {
    // Flattened ids: devices {0,1} and {2,3} (device d holds d + 1).
    let flat = all_reduce("channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true");
    assert_eq!(
        run(&flat, Numbering::Partitions),
        vec![vec![3.0], vec![3.0], vec![7.0], vec![7.0]]
    );
    // A channel without global ids names replicas, every partition of each: on one replica
    // of 4 partitions, group {0} is all 4 devices.
    let cross = all_reduce("channel_id=1, replica_groups={{0}}");
    assert_eq!(run(&cross, Numbering::Partitions), vec![vec![10.0]; 4]);
    // No channel: replicas of this partition, so each partition alone on one replica.
    let replicas = all_reduce("replica_groups={{0}}");
    assert_eq!(
        run(&replicas, Numbering::Partitions),
        vec![vec![1.0], vec![2.0], vec![3.0], vec![4.0]]
    );
    // The per-replica form: replica ids.
    let per_replica = all_reduce("replica_groups={{0,2},{1,3}}");
    assert_eq!(
        run(&per_replica, Numbering::Replicas),
        vec![vec![4.0], vec![6.0], vec![4.0], vec![6.0]]
    );
}

#[test]
fn collective_permute_pairs_name_partitions_with_a_channel() {
    let permute = |attrs: &str| {
        format!(
            "HloModule cp\nENTRY e {{\n  p = f32[1] parameter(0)\n  ROOT c = f32[1] \
             collective-permute(p), {attrs}source_target_pairs={{{{0,1}},{{1,0}},{{2,3}},{{3,2}}}}\n}}\n"
        )
    };
    assert_eq!(
        run(&permute("channel_id=1, "), Numbering::Partitions),
        vec![vec![2.0], vec![1.0], vec![4.0], vec![3.0]]
    );
    assert_eq!(
        run(&permute(""), Numbering::Replicas),
        vec![vec![2.0], vec![1.0], vec![4.0], vec![3.0]]
    );
    // Without a channel the pairs name replicas, and a shard_map body has one: an error.
    let module = parse_module(&permute(""), None).unwrap();
    let args = vec![
        vec![Literal::Array(Array::zeros(ArrayShape::new(
            ElementType::F32,
            &[1]
        )))];
        4
    ];
    let e = evaluate_on_devices(&module, args, Numbering::Partitions, None).unwrap_err();
    assert!(
        e.message.contains("names a replica that does not run"),
        "{e}"
    );
}
