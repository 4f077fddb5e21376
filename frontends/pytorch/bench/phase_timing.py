"""Where a stitched call's tiles spend their SM cycles, phase by phase (a
diagnostic, GPU only): sets GPUOS_PHASE_TIMING=1 so that the kernel image is
built with the phase counters of device/include/gpuos/device/phase_timing.cuh
(the worker's steps, a stitched tile's Run and count, the stages of few-row
products and of attention), compiles each workload of workloads.py with
gpuos, makes --calls calls after 20 warm-up calls and prints, per slot, the
counts per call and the mean cycles (thread 0), from the difference of the
runtime's phase sums (gpuos.stats()["runtimes"]["cuda:0"]) before and after.

The instrumented image is much slower (every mark is two atomics on lines
all blocks share): compare slots within one run, not with plain timings.
Use its own build cache (GPUOS_TORCH_CACHE) so that the instrumented image
does not replace the plain one.

    python frontends/pytorch/bench/phase_timing.py --out DIR [--calls 200] [--case mlp]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ["GPUOS_PHASE_TIMING"] = "1"

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_events  # noqa: E402
import workloads  # noqa: E402

import gpuos  # noqa: E402

SLOTS = {0: "worker: window, tile copy, claim", 1: "worker: descriptors",
         2: "worker: operator call (thread 0)", 3: "worker: barrier after the operator",
         4: "worker: completion and successors", 5: "worker: whole step",
         10: "stitched: stage Run", 11: "stitched: count (barrier, fence, adds; unwaited: barrier, add)",
         12: "stage: wait (attention: + q rows, first loads)",
         13: "stage: a's rows (products) / scores (attention)",
         14: "stage: products / softmax (attention)", 15: "stage: stores / out (attention)",
         16: "direct, admitting: checks, copy, fence, opening",
         17: "direct, admitting: task and descriptors read back",
         18: "direct, helper: wait for the opening", 19: "direct, helper: task, descriptors, claim",
         20: "direct: setup (descriptor, operator)", 21: "direct: barrier before the call",
         22: "direct: the call and the count", 23: "direct: completion",
         24: "queue: the slot's read and parse", 25: "queue: a claim after the tail's read",
         26: "direct tile start: items (later tiles: + claim)", 27: "direct tile start: recorder",
         28: "queue: the tail's read that showed a submission"}


def _sums(device_key: str) -> dict:
    runtime = gpuos.stats()["runtimes"][device_key]
    if "gpuos_phase_cycles" not in runtime:
        raise SystemExit("no phase sums: the kernel image was not built with GPUOS_PHASE_TIMING")
    return runtime


def _case(case, device, calls: int) -> dict:
    module = workloads.build(case, device)
    inputs = case.make_inputs(device, torch.Generator().manual_seed(0))
    compiled = gpuos.compile(module)
    key = f"cuda:{device.index}"
    print(f"{case.name}: building and warming up", flush=True)
    with torch.no_grad():
        trace_events.time_calls(compiled, inputs, device, 20)
        before = _sums(key)
        # PyTorch's stream, as the benchmark synchronizes: torch.cuda.
        # synchronize() would also wait for the worker to park after every
        # call (docs/pytorch.md), so each call would start a new grid.
        stream = torch.cuda.current_stream(device)
        start = time.perf_counter()
        for _ in range(calls):
            compiled(*inputs)
            stream.synchronize()
        wall_us = (time.perf_counter() - start) / calls * 1e6
        after = _sums(key)
    slots = {}
    for k in range(len(after["gpuos_phase_cycles"])):
        count = after["gpuos_phase_counts"][k] - before["gpuos_phase_counts"][k]
        cycles = after["gpuos_phase_cycles"][k] - before["gpuos_phase_cycles"][k]
        if count:
            slots[k] = {"name": SLOTS.get(k, "?"), "per_call": count / calls,
                        "mean_cycles": cycles / count}
    return {"case": case.name, "wall_us_instrumented": wall_us, "slots": slots}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for phase_timing.json")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per case")
    parser.add_argument("--case", default="", help="only cases whose name contains this")
    args = parser.parse_args()
    device = trace_events.cuda_device_or_skip(args.out)
    if device is None:
        return 0
    results = []
    for case in workloads.cases():
        if args.case and args.case not in case.name:
            continue
        r = _case(case, device, args.calls)
        results.append(r)
        print(f"{case.name}: {r['wall_us_instrumented']:.1f} us a call (instrumented image)")
        for k, s in r["slots"].items():
            print(f"   slot {k:2d} {s['name']:48s} per call {s['per_call']:7.1f}  "
                  f"mean cycles {s['mean_cycles']:9.1f}")
        sys.stdout.flush()  # a run cut short by a time limit keeps what it printed
    with open(os.path.join(args.out, "phase_timing.json"), "w") as f:
        json.dump({"commit": os.environ.get("GPUOS_COMMIT", "unknown"), "cases": results}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
