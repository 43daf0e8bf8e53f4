#!/usr/bin/env python3
"""Checks a tessel trace (Chrome trace event JSON, plain or .gz) by hand.

    check_trace.py TRACE [--profile-output OUT.txt]

- the file is the JSON object form (traceEvents, displayTimeUnit) Perfetto's JSON loader and
  chrome://tracing read; every "X" event has name, ts, dur, pid and tid; events are sorted by
  ts; every process and thread has an "M" name;
- on every replica track, the kernels inside each "program run" span add up to its duration
  within 10% (the step time: the run of the compiled loop, divided by its steps);
- with --profile-output (what `tessel run --backend jit --profile --repeat R --trace-dir DIR`
  printed): every kernel of the profile table is in the trace with its time within 10%, and
  the kernels' share of run_ms_median (the command's whole run, with the host's copies of the
  arguments in and the results out) is printed; below 50% fails.

Prints the busiest kernels; exits 1 on the first failed check.
"""
import argparse
import collections
import gzip
import json
import re
import sys


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def check_format(doc):
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("not a JSON object with a traceEvents list")
    if doc.get("displayTimeUnit") not in ("ms", "ns"):
        fail(f"displayTimeUnit is {doc.get('displayTimeUnit')!r}")
    events = doc["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    complete = [e for e in events if e.get("ph") == "X"]
    for e in complete:
        for key in ("name", "ts", "dur", "pid", "tid"):
            if key not in e:
                fail(f"an X event has no {key}: {e}")
        if e["dur"] < 0:
            fail(f"negative duration: {e}")
        if e["pid"] not in processes or (e["pid"], e["tid"]) not in threads:
            fail(f"an event on an unnamed process or thread: {e}")
    ts = [e["ts"] for e in complete]
    if ts != sorted(ts):
        fail("X events are not sorted by ts")
    return complete, threads


def check_runs(complete, threads):
    """Kernels inside each program span add up to it within 10%; returns kernel sums."""
    sums = collections.defaultdict(float)
    runs = 0
    for (pid, tid), name in sorted(threads.items()):
        if not name.startswith("replica "):
            continue
        track = [e for e in complete if (e["pid"], e["tid"]) == (pid, tid)]
        spans = [e for e in track if e.get("cat") == "program"]
        kernels = [e for e in track if e.get("cat") != "program"]
        for span in spans:
            end = span["ts"] + span["dur"]
            inside = sum(k["dur"] for k in kernels if span["ts"] <= k["ts"] < end)
            if not 0.9 * span["dur"] <= inside <= span["dur"] * 1.0001:
                fail(f"{name}: kernels add up to {inside:.1} us in a run of {span['dur']:.1} us")
        print(f"{name}: {len(spans)} program runs, {len(kernels)} kernel and routine events, "
              f"{sum(s['dur'] for s in spans) / 1e3:.3f} ms of runs, "
              f"{sum(k['dur'] for k in kernels) / 1e3:.3f} ms of kernels")
        if name == "replica 0":
            runs = len(spans)
            for k in kernels:
                sums[k["name"]] += k["dur"] / 1e3
    return sums, runs


def check_profile(path, sums, runs):
    text = open(path).read()
    median = re.search(r"run_ms_median: ([0-9.]+)", text)
    per_iteration = re.search(r"loop_ms_per_iteration: ([0-9.]+)", text)
    rows = re.findall(r"^\s*([0-9.]+)\s+[0-9.]+%\s+(\d+)\s+(\S+)\s+(\S+)\s*$", text, re.M)
    if not rows:
        fail(f"{path} has no profile table (run with --profile)")
    runs = max(runs, 1)
    # A loop's table is per iteration: K iterations per run.
    k = 1
    if median and per_iteration:
        k = round(float(median.group(1)) / float(per_iteration.group(1)))
    for ms, _calls, kind, name in rows:
        if name == "total":
            continue
        got = sums.get(name)
        if got is None:
            fail(f"{name} ({kind}) is in the profile, not in the trace")
        per_row = got / runs / k
        if abs(per_row - float(ms)) > 0.1 * float(ms) + 0.002:
            fail(f"{name}: {per_row:.3f} ms traced, {ms} ms profiled (per run / {k})")
    print(f"{len(rows) - 1} profiled kernels found in the trace, times within 10%")
    if median:
        kernels = sum(sums.values()) / runs
        wall = float(median.group(1))
        share = kernels / wall
        print(f"kernels {kernels:.3f} ms per run, run_ms_median {wall} ms: {100 * share:.1f}%")
        if share < 0.5 or share > 1.1:
            fail("the kernels do not account for the run")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--profile-output")
    args = p.parse_args()
    complete, threads = check_format(load(args.trace))
    print(f"{args.trace}: {len(complete)} events on {len(threads)} threads "
          f"({', '.join(sorted(set(threads.values())))})")
    sums, runs = check_runs(complete, threads)
    for name, ms in sorted(sums.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {ms / max(runs, 1):9.3f} ms/run  {name}")
    if args.profile_output:
        check_profile(args.profile_output, sums, runs)
    print("OK")


if __name__ == "__main__":
    main()
