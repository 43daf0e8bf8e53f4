//! Hubs of a run split over two hosts, joined in one process by a link that hands each
//! host's deposits straight to the other hub (what the MPI transport does across processes):
//! every collective (all-to-all too) gives bitwise the results of one hub holding all
//! replicas, and a failure on one host stops the replicas waiting on the other. With unordered
//! sums (`--fast-allreduce`) the all-reduce sums over every replica go through the link's
//! all-reduce instead and agree within rounding, while every other collective stays bitwise.

use super::rendezvous::{Hub, RemoteHosts, ReplicaContext, SlotKey};
use super::{evaluate_replicated, Numbering};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use tessel_compiler::hlo_text::parse_module;
use tessel_compiler::interpreter::{evaluate_linked, EvalError};
use tessel_compiler::ir::{Array, ArrayData, Literal, Module};

/// The other host's hub, reached directly; the two hosts' partial sums meet in `sums`.
#[derive(Default)]
struct Direct {
    own: OnceLock<Weak<Hub>>,
    other: OnceLock<Weak<Hub>>,
    sums: Arc<Sums>,
    /// How many of this host's members wait for the other host's operands now, and how many
    /// waits began in all.
    awaiting: AtomicUsize,
    waits: AtomicUsize,
}

/// What an all-reduce of the hosts' partial sums does, in one process: the first partial of
/// a slot waits for the second, then both hubs get their sum.
#[derive(Default)]
struct Sums {
    waiting: Mutex<HashMap<SlotKey, Array>>,
    done: AtomicUsize,
}

impl Direct {
    fn other(&self) -> Arc<Hub> {
        self.other
            .get()
            .and_then(Weak::upgrade)
            .expect("both hubs live")
    }
}

impl RemoteHosts for Direct {
    fn send(&self, key: &SlotKey, group: &[usize], parts: Vec<(usize, Arc<Vec<Literal>>)>) {
        let parts = parts.into_iter().map(|(p, v)| (p, (*v).clone())).collect();
        self.other().deliver(*key, group.len(), parts);
    }

    fn abort(&self, message: &str) {
        self.other().stop_from_remote(message.to_string());
    }

    fn awaiting(&self, on: bool) {
        if on {
            self.awaiting.fetch_add(1, Ordering::SeqCst);
            self.waits.fetch_add(1, Ordering::SeqCst);
        } else {
            self.awaiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn sum(&self, key: &SlotKey, partial: Array) {
        let first = self.sums.waiting.lock().unwrap().remove(key);
        let Some(first) = first else {
            self.sums.waiting.lock().unwrap().insert(*key, partial);
            return;
        };
        let total = match (&first.data, &partial.data) {
            (ArrayData::F32(a), ArrayData::F32(b)) => Array::f32(
                &first.shape.dims,
                a.iter().zip(b).map(|(a, b)| a + b).collect(),
            ),
            other => panic!("a sum of {other:?}"),
        };
        self.sums.done.fetch_add(1, Ordering::SeqCst);
        let own = self
            .own
            .get()
            .and_then(Weak::upgrade)
            .expect("both hubs live");
        own.deliver_sum(*key, total.clone());
        self.other().deliver_sum(*key, total);
    }
}

/// Two hosts' hubs and the replicas each holds.
type TwoHosts = [(Arc<Hub>, Range<usize>); 2];

/// Two hubs for replicas `0..split` and `split..n`, each the other's remote host.
fn two_hosts(n: usize, split: usize) -> TwoHosts {
    two_hosts_summing(n, split, false).0
}

/// The same, with unordered sums when `fast`; also how many sums the hosts added up.
fn two_hosts_summing(n: usize, split: usize, fast: bool) -> (TwoHosts, Arc<Sums>) {
    let sums = Arc::new(Sums::default());
    let direct = || {
        Arc::new(Direct {
            sums: sums.clone(),
            ..Direct::default()
        })
    };
    let (a, b) = (direct(), direct());
    let hub_a = Arc::new(Hub::spanning(n, 0..split, a.clone()).summing_unordered(fast));
    let hub_b = Arc::new(Hub::spanning(n, split..n, b.clone()).summing_unordered(fast));
    let _ = a.own.set(Arc::downgrade(&hub_a));
    let _ = b.own.set(Arc::downgrade(&hub_b));
    let _ = a.other.set(Arc::downgrade(&hub_b));
    let _ = b.other.set(Arc::downgrade(&hub_a));
    ([(hub_a, 0..split), (hub_b, split..n)], sums)
}

/// Runs `m` on the replicas `hubs` hold of a run of `args.len()`, replica r meeting the
/// others at the hub holding it; their results in replica order.
fn run_split(
    m: &Module,
    args: &[Vec<Literal>],
    hubs: &[(Arc<Hub>, Range<usize>)],
) -> Vec<Result<Literal, EvalError>> {
    let n = args.len();
    std::thread::scope(|s| {
        let handles: Vec<_> = hubs
            .iter()
            .flat_map(|(hub, range)| range.clone().map(move |r| (hub.clone(), r)))
            .map(|(hub, r)| {
                let args = &args[r];
                s.spawn(move || {
                    let link = ReplicaContext::new(r, n, Numbering::Replicas, hub, None);
                    evaluate_linked(m, args, &link)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn collectives() -> Module {
    parse_module(include_str!("../../../tests/mpi/collectives.hlo"), None).unwrap()
}

/// Replica r's x: values whose float sums depend on the order of addition.
fn x(r: usize) -> Vec<Literal> {
    let v = (0..8)
        .map(|i| {
            let sign = if (r + i).is_multiple_of(2) { 1.0 } else { -1.0 };
            sign * 1e8 + 0.1 * (i + 1) as f32 * (r + 1) as f32 + r as f32 / 3.0
        })
        .collect();
    vec![Literal::Array(Array::f32(&[8], v))]
}

fn bits(l: &Literal) -> Vec<Vec<u8>> {
    l.leaves().iter().map(|a| a.data.to_le_bytes()).collect()
}

#[test]
fn every_collective_split_over_hosts_is_bitwise_the_one_process_result() {
    let m = collectives();
    let args: Vec<Vec<Literal>> = (0..4).map(x).collect();
    let want = evaluate_replicated(&m, args.clone()).unwrap();
    // 2 + 2, and the uneven 1 + 3 and 3 + 1.
    for split in [2, 1, 3] {
        let got = run_split(&m, &args, &two_hosts(4, split));
        for (r, g) in got.iter().enumerate() {
            let g = g.as_ref().unwrap_or_else(|e| panic!("split {split}: {e}"));
            assert_eq!(bits(g), bits(&want[r]), "split {split}, replica {r}");
        }
    }
}

#[test]
fn a_member_waiting_for_the_other_host_says_so_until_its_operands_arrive() {
    let m = collectives();
    let args: Vec<Vec<Literal>> = (0..4).map(x).collect();
    let want = evaluate_replicated(&m, args.clone()).unwrap();
    let (a, b) = (Arc::new(Direct::default()), Arc::new(Direct::default()));
    let hub_a = Arc::new(Hub::spanning(4, 0..2, a.clone()));
    let hub_b = Arc::new(Hub::spanning(4, 2..4, b.clone()));
    let _ = a.other.set(Arc::downgrade(&hub_b));
    let _ = b.other.set(Arc::downgrade(&hub_a));
    // Host b starts late, so host a's members wait at the first collective.
    let got: Vec<Literal> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|r| {
                let hub = if r < 2 { hub_a.clone() } else { hub_b.clone() };
                let args = &args[r];
                let m = &m;
                s.spawn(move || {
                    if r >= 2 {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    let link = ReplicaContext::new(r, 4, Numbering::Replicas, hub, None);
                    evaluate_linked(m, args, &link).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (r, g) in got.iter().enumerate() {
        assert_eq!(bits(g), bits(&want[r]), "replica {r}");
    }
    assert!(a.waits.load(Ordering::SeqCst) >= 1, "host a never waited");
    // Every wait ended.
    assert_eq!(a.awaiting.load(Ordering::SeqCst), 0);
    assert_eq!(b.awaiting.load(Ordering::SeqCst), 0);
}

#[test]
fn unordered_sums_agree_within_rounding_and_leave_the_rest_bitwise() {
    let m = collectives();
    // Terms whose float sum depends on the order: the module adds the replica id, so
    // replica 1 contributes 1 and replica 3 contributes 3 next to +-1e8.
    let args: Vec<Vec<Literal>> = (0..4)
        .map(|r| {
            let big = [1e8, 0.0, -1e8, 0.0][r];
            let v = (0..8).map(|i| big + 0.25 * i as f32).collect();
            vec![Literal::Array(Array::f32(&[8], v))]
        })
        .collect();
    let want = evaluate_replicated(&m, args.clone()).unwrap();
    let f32s = |a: &Array| match &a.data {
        ArrayData::F32(v) => v.clone(),
        other => panic!("{other:?}"),
    };
    // The scale of the sum's terms: rounding errors are relative to it, not to the sum.
    let scale: Vec<f32> = (0..8)
        .map(|i| {
            (0..4)
                .map(|r| (f32s(args[r][0].as_array().unwrap())[i] + r as f32).abs())
                .sum()
        })
        .collect();
    let mut differs = false;
    for split in [2, 1, 3] {
        let (hubs, sums) = two_hosts_summing(4, split, true);
        let got = run_split(&m, &args, &hubs);
        // One step: the all-reduce over every replica (`sum`) went through the hosts' sum.
        assert_eq!(sums.done.load(Ordering::SeqCst), 1, "split {split}");
        for (r, g) in got.iter().enumerate() {
            let g = g.as_ref().unwrap_or_else(|e| panic!("split {split}: {e}"));
            let (fast, exact) = (f32s(g.leaves()[0]), f32s(want[r].leaves()[0]));
            for i in 0..8 {
                let err = (fast[i] - exact[i]).abs();
                assert!(
                    err <= 8.0 * f32::EPSILON * scale[i],
                    "split {split}, replica {r}: {fast:?} against {exact:?}"
                );
            }
            differs |= fast != exact;
            // Every other collective (groups of part of the replicas, max, gathers,
            // reduce-scatters, permutes) is the default's, bit for bit.
            assert_eq!(
                bits(g)[1..],
                bits(&want[r])[1..],
                "split {split}, replica {r}"
            );
        }
        // Every replica got the same sum.
        let first = bits(got[0].as_ref().unwrap())[0].clone();
        assert!(got.iter().all(|g| bits(g.as_ref().unwrap())[0] == first));
    }
    assert!(
        differs,
        "these inputs' sums depend on the order: the fast path was not taken"
    );
    // Off, the hosts never add up partial sums.
    let (hubs, sums) = two_hosts_summing(4, 2, false);
    run_split(&m, &args, &hubs);
    assert_eq!(sums.done.load(Ordering::SeqCst), 0);
}

#[test]
fn all_to_all_split_over_hosts_is_bitwise_the_one_process_result() {
    let m = parse_module(include_str!("../../../tests/mpi/all_to_all.hlo"), None).unwrap();
    let args: Vec<Vec<Literal>> = (0..6)
        .map(|r| {
            let v = (0..12).map(|i| (100 * r + i) as f32).collect();
            vec![Literal::Array(Array::f32(&[6, 2], v))]
        })
        .collect();
    let want = evaluate_replicated(&m, args.clone()).unwrap();
    // 3 + 3 (groups {5,0,3} and {1,4,2} span the hosts unevenly), 1 + 5 and 4 + 2.
    for split in [3, 1, 4] {
        let got = run_split(&m, &args, &two_hosts(6, split));
        for (r, g) in got.iter().enumerate() {
            let g = g.as_ref().unwrap_or_else(|e| panic!("split {split}: {e}"));
            assert_eq!(bits(g), bits(&want[r]), "split {split}, replica {r}");
        }
    }
}

#[test]
fn a_failure_on_one_host_stops_the_replicas_waiting_on_the_other() {
    let m = collectives();
    let args: Vec<Vec<Literal>> = (0..4).map(x).collect();
    let hubs = two_hosts(4, 2);
    let (waiting, failing) = (&hubs[..1], hubs[1].0.clone());
    std::thread::scope(|s| {
        let run = s.spawn(|| run_split(&m, &args, waiting));
        std::thread::sleep(std::time::Duration::from_millis(50));
        failing.poison("stopped because replica 3 failed: out of luck".into());
        for (r, out) in run.join().unwrap().into_iter().enumerate() {
            let e = out.expect_err("replicas 2 and 3 never came");
            assert!(
                e.to_string().contains("replica 3 failed: out of luck"),
                "{r}: {e}"
            );
        }
    });
}

#[test]
fn deposits_that_do_not_fit_the_group_stop_the_run() {
    let hubs = two_hosts(4, 2);
    let hub = hubs[0].0.clone();
    let m = collectives();
    let site_key = |first| {
        let site = tessel_compiler::interpreter::CollectiveSite {
            computation: m.entry,
            instruction: tessel_compiler::ir::InstrId::new(0),
        };
        (site, 1, first)
    };
    hub.deliver(site_key(0), 4, vec![(9, vec![])]);
    let link = ReplicaContext::new(0, 4, Numbering::Replicas, hub, None);
    let e = evaluate_linked(&m, &x(0), &link).unwrap_err();
    assert!(e.to_string().contains("does not match"), "{e}");
}
