"""Where a gpuos.compile call's time goes, per workload: host wall time of a
call against the device's own timeline (diagnostics, not a benchmark).

For each case of workloads.py: compile with gpuos, warm up, make `--calls`
timed calls (each until PyTorch's current stream is synchronized, as
run_workloads.py times them), export the runtime's task timeline and
summarize it:

    wall_us         host time of a call (median)
    device_span_us  first task start to last task end of a submission (median)
    gap_us          wall_us - device_span_us: host and queue overhead
    per operator    tasks, median and total device time per call

Needs a CUDA device; sets GPUOS_TORCH_TRACE itself. Writes
<out>/task_profile.json and prints a table.

    python frontends/pytorch/bench/profile_tasks.py --out OUT [--calls 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections import defaultdict

os.environ.setdefault("GPUOS_TORCH_TRACE", str(1 << 20))

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_events  # noqa: E402
import workloads  # noqa: E402

import gpuos  # noqa: E402


def _summarize(trace_path: str, calls: int) -> dict:
    """The newest `calls` submissions of the trace (the timed calls: one
    submission each)."""
    by_submission = trace_events.newest_submissions(trace_path, calls)
    spans, per_op = [], defaultdict(list)
    for sequence, tasks in by_submission.items():
        spans.append(max(t["ts"] + t["dur"] for t in tasks) - min(t["ts"] for t in tasks))
        for t in tasks:
            per_op[t["name"]].append(t["dur"])
    calls = max(len(by_submission), 1)
    ops = {name: {"tiles_per_call": len(durs) / calls,
                  "median_us": statistics.median(durs),
                  "total_us_per_call": sum(durs) / calls}
           for name, durs in sorted(per_op.items(), key=lambda kv: -sum(kv[1]))}
    return {"submissions": len(by_submission),
            "device_span_us": statistics.median(spans) if spans else None,
            "operators": ops}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for task_profile.json and traces")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per case")
    args = parser.parse_args()
    device = trace_events.cuda_device_or_skip(args.out)
    if device is None:
        return 0
    generator = torch.Generator().manual_seed(0)
    results = []
    for case in workloads.cases():
        module = workloads.build(case, device)
        inputs = case.make_inputs(device, generator)
        compiled = gpuos.compile(module)
        with torch.no_grad():
            trace_events.time_calls(compiled, inputs, device, 10)
            wall = trace_events.time_calls(compiled, inputs, device, args.calls)
        trace_path = os.path.join(args.out, f"trace_{case.name.replace(' ', '_')}.json")
        gpuos.export_trace(trace_path)
        summary = _summarize(trace_path, args.calls)
        summary.update(case=case.name, wall_us=statistics.median(wall), calls=args.calls)
        if summary["device_span_us"] is not None:
            summary["gap_us"] = summary["wall_us"] - summary["device_span_us"]
        results.append(summary)
        print(f"{case.name:28s} wall {summary['wall_us']:8.1f} us  device span "
              f"{summary['device_span_us'] or float('nan'):8.1f} us  "
              f"({summary['submissions']} submissions traced)")
        for name, op in list(summary["operators"].items())[:8]:
            print(f"    {name:24s} {op['tiles_per_call']:6.1f} tiles/call  median "
                  f"{op['median_us']:7.2f} us  total {op['total_us_per_call']:8.1f} us/call")
    trace_events.write_cases(os.path.join(args.out, "task_profile.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
