"""When the worker grid parks and relaunches during a run of calls (a
diagnostic, not a benchmark): makes --rounds blocks of --block calls of one
compiled case, optionally --eager calls of the eager module between blocks
(the benchmark's interleaving, during which the grid parks), then reads the
task trace and reports, per call, the host's gap before it (the previous
call's synchronize returning until this call starts), its wall time, the
grid that ran it (the trace's `grid`, a new number after each relaunch) and
on how many blocks. A relaunch inside a block of calls, where the previous
call ended a gap shorter than idle_park before, is one the worker should not
have made; one after a longer gap is the park doing its job.

    python frontends/pytorch/bench/park_probe.py --out OUT \\
        [--case "decoder_step kv_cache=128"] [--variant gpuos_unstitched] \\
        [--rounds 20] [--block 12] [--eager 12]

Reads nothing between calls (no stats), so the gaps are the host's own.
Outputs are not checked (run_workloads.py does that). Needs a CUDA device;
sets GPUOS_TORCH_TRACE itself. Writes <out>/park_probe.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("GPUOS_TORCH_TRACE", str(1 << 21))

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_events  # noqa: E402
import variants  # noqa: E402
import workloads  # noqa: E402

import gpuos  # noqa: E402



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for the JSON")
    parser.add_argument("--case", default="decoder_step kv_cache=128",
                        help="a case name of workloads.py")
    parser.add_argument("--variant", default="gpuos_unstitched",
                        choices=("gpuos_compile", "gpuos_unstitched"))
    parser.add_argument("--rounds", type=int, default=20,
                        help="blocks of calls (the trace export takes longer with more)")
    parser.add_argument("--block", type=int, default=12, help="calls per block")
    parser.add_argument("--eager", type=int, default=12,
                        help="eager calls between blocks (0: none, calls back to back)")
    args = parser.parse_args()
    known = {c.name: c for c in workloads.cases()}
    if args.case not in known:
        parser.error(f"unknown case {args.case!r}; known: {', '.join(known)}")
    if args.rounds < 1 or args.block < 1 or args.eager < 0:
        parser.error("--rounds and --block must be at least 1, --eager at least 0")
    device = trace_events.cuda_device_or_skip(args.out)
    if device is None:
        return 0
    case = known[args.case]
    module = workloads.build(case, device)
    inputs = case.make_inputs(device, torch.Generator().manual_seed(0))
    stream = torch.cuda.current_stream(device)
    calls = []
    counted = ("submissions", "compiled_calls")
    with torch.no_grad():
        # The benchmark's variants (run_workloads.py), built the same way.
        eager = variants.make("eager", module, inputs, device, smoke=False)
        compiled = variants.make(args.variant, module, inputs, device, smoke=False)
        if compiled.call is None:
            print(f"park_probe: {args.variant}: {compiled.skipped or compiled.error}",
                  file=sys.stderr)
            return 1
        for _ in range(20):
            compiled.call()
        stream.synchronize()
        before = {k: gpuos.stats()[k] for k in counted}
        for r in range(args.rounds):
            for _ in range(args.eager):
                eager.call()
            stream.synchronize()
            for i in range(args.block):
                start = time.perf_counter_ns()
                compiled.call()
                stream.synchronize()
                calls.append({"round": r, "index": i, "start_ns": start,
                              "end_ns": time.perf_counter_ns()})
    made = {k: gpuos.stats()[k] - before[k] for k in counted}
    if made != {k: len(calls) for k in counted}:
        # The report pairs each call with one submission of the trace.
        print(f"park_probe: {len(calls)} calls made {made['submissions']} submissions and "
              f"{made['compiled_calls']} compiled calls; the probe needs one compiled "
              "submission a call", file=sys.stderr)
        return 1
    # The runtime's idle_park, as its worker got it (the stats' echo of
    # RuntimeConfig::idle_park), against which a relaunch's gap is judged.
    idle_park_us = float(gpuos.stats()["runtimes"][f"cuda:{device.index or 0}"]["idle_park_us"])
    path = os.path.join(args.out, "park_probe_trace.json")
    gpuos.export_trace(path)
    report = trace_events.relaunch_report(
        calls, trace_events.newest_submissions(path, len(calls)), idle_park_us)
    os.remove(path)
    report.update(case=case.name, variant=args.variant, rounds=args.rounds, block=args.block,
                  eager_between=args.eager)
    print(f"{case.name} {args.variant}: {report['calls']} calls, median "
          f"{report['median_wall_us']:.1f} us on {report['median_blocks']} blocks; new grids "
          f"{report['new_grids']} ({report['new_grids_at_round_start']} at a round's start, "
          f"{report['new_grids_inside_rounds']} inside, {report['new_grids_after_short_gap']} "
          f"of those after a gap under {idle_park_us:.0f} us); median gap inside rounds "
          f"{report['median_gap_inside_rounds_us'] or float('nan'):.1f} us; calls on few "
          f"blocks {len(report['calls_on_few_blocks'])}")
    trace_events.write_cases(os.path.join(args.out, "park_probe.json"), [report])
    return 0


if __name__ == "__main__":
    sys.exit(main())
