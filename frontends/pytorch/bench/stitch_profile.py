"""Where a stitched program's device time goes, stage by stage (a diagnostic,
not a benchmark): for each case of workloads.py (or --case), compile with
gpuos (stitched), make --calls timed calls, export the task timeline and
print per stage, as medians over the calls, in us from the call's first tile
start: when its first tile started (was claimed), when its last tile
started, when its last tile ended (the stage is done then), and the median
tile length (which for a stage that waits includes the wait). For every
case, stitched or not, also where the device's part of a call goes
(trace_events.queue_breakdown: admission, tiles, completion) and the rest of
the call's wall time (the host's part, the pick-up of the submission and the
host's noticing its completion).

    python frontends/pytorch/bench/stitch_profile.py --out OUT [--calls 50] \
        [--case "mlp_microbatch batch=1" --case "attention_small seq=32" ...]

Needs a CUDA device; sets GPUOS_TORCH_TRACE itself. Writes
<out>/stitch_profile.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

os.environ.setdefault("GPUOS_TORCH_TRACE", str(1 << 20))

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_events  # noqa: E402
import workloads  # noqa: E402

import gpuos  # noqa: E402
from gpuos import _runtime  # noqa: E402


def _stages(note: str) -> list[tuple[str, int]]:
    """(op, tiles) per stage from a stitched program's note."""
    return [(op, int(tiles)) for op, tiles in re.findall(r"(\w+)\((\d+)\)", note.split(":", 2)[-1])]


def _profile(case, device, calls: int, out: str) -> dict:
    module = workloads.build(case, device)
    inputs = case.make_inputs(device, torch.Generator().manual_seed(0))
    compiled = gpuos.compile(module)
    notes = []
    original = _runtime.STATS.note_program

    def remember(program):
        notes.append(program.stitch_note)
        original(program)

    _runtime.STATS.note_program = remember
    runtime = _runtime.runtime(device.index or 0)
    try:
        with torch.no_grad():
            trace_events.time_calls(compiled, inputs, device, 10)
            direct_before = json.loads(runtime.stats_json())["direct_submissions"]
            wall = trace_events.time_calls(compiled, inputs, device, calls)
            direct = json.loads(runtime.stats_json())["direct_submissions"] - direct_before
    finally:
        _runtime.STATS.note_program = original
    note = next((n for n in notes if not n.startswith("not stitched")), "")
    # direct_calls: of the timed calls' submissions, how many ran as direct
    # tiles (docs/runtime.md, "Direct tiles"); the rest took the board path.
    result = {"case": case.name, "wall_us": statistics.median(wall), "note": note,
              "direct_calls": direct, "timed_calls": len(wall)}
    path = os.path.join(out, "trace_" + re.sub(r"[^A-Za-z0-9_.-]", "_", case.name) + ".json")
    gpuos.export_trace(path)
    result["queue_us"] = trace_events.queue_breakdown(path, calls)
    if "device" in result["queue_us"]:
        result["queue_us"]["wall_minus_device"] = result["wall_us"] - result["queue_us"]["device"]
    if not note:
        result["stages"] = []
        result["why_not"] = notes
        return result
    stages = _stages(note)
    per_stage = [{"first_start": [], "last_start": [], "end": [], "tile": []} for _ in stages]
    spans = []
    for tasks in trace_events.newest_submissions(path, calls).values():
        origin = min(t["ts"] for t in tasks)
        spans.append(max(t["ts"] + t["dur"] for t in tasks) - origin)
        bounds, first = [], 0
        for _, tiles in stages:
            bounds.append((first, first + tiles))
            first += tiles
        for (lo, hi), stats in zip(bounds, per_stage):
            mine = [t for t in tasks if lo <= t["args"]["tile"] < hi]
            if not mine:
                continue
            stats["first_start"].append(min(t["ts"] for t in mine) - origin)
            stats["last_start"].append(max(t["ts"] for t in mine) - origin)
            stats["end"].append(max(t["ts"] + t["dur"] for t in mine) - origin)
            stats["tile"].extend(t["dur"] for t in mine)
    result["device_span_us"] = statistics.median(spans) if spans else None
    result["stages"] = [
        {"op": op, "tiles": tiles,
         **{k: (statistics.median(v) if v else None) for k, v in stats.items()}}
        for (op, tiles), stats in zip(stages, per_stage)]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for the JSON and traces")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per case")
    parser.add_argument("--case", action="append",
                        help="a case name of workloads.py; repeat for several (default: all)")
    args = parser.parse_args()
    unknown = set(args.case or []) - {c.name for c in workloads.cases()}
    if unknown:
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}; "
                     f"known: {', '.join(c.name for c in workloads.cases())}")
    device = trace_events.cuda_device_or_skip(args.out)
    if device is None:
        return 0
    cases = [c for c in workloads.cases() if not args.case or c.name in args.case]
    results = []
    for case in cases:
        r = _profile(case, device, args.calls, args.out)
        results.append(r)
        print(f"{case.name}: wall {r['wall_us']:.1f} us, device span "
              f"{r.get('device_span_us') or float('nan'):.1f} us, "
              f"direct {r['direct_calls']}/{r['timed_calls']} calls")
        print("    queue (us): " + ", ".join(f"{k} {v:.2f}" for k, v in r["queue_us"].items()))
        for s in r["stages"]:
            print(f"    {s['op']:12s} {s['tiles']:4d} tiles  first start {s['first_start']:6.1f}  "
                  f"last start {s['last_start']:6.1f}  done {s['end']:6.1f}  tile {s['tile']:5.2f}")
    trace_events.write_cases(os.path.join(args.out, "stitch_profile.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
