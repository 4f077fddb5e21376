"""Per-task device cost in chains of small dependent tasks (a diagnostic, not
a benchmark): does a task cost the same when the block has just run the same
operator (warm instruction cache, descriptors, data) as after a different one?

For each case, compile with gpuos, warm up, make `--calls` timed calls (each
until PyTorch's current stream is synchronized), export the task timeline and
report the call's host time (until it returns, then the synchronize) and, per
task position in the submission, the median tile duration and the median gap
between the previous task's end and this task's first start:

    ln_chain8        8 x layer_norm([1, 256]) back to back (the same operator)
    softmax_chain8   8 x softmax([1, 256])
    ln_softmax_alt   4 x (layer_norm, softmax): the operator changes every task
    linear_chain4    4 x Linear(256, 256) at batch 1 (tiled tasks back to back)
    mlp_b1           workloads.py's mlp_microbatch at batch 1

Needs a CUDA device; sets GPUOS_TORCH_TRACE itself (GPUOS_TORCH_BLOCKS sets the
worker's block count). Writes <out>/task_chain_probe<suffix>.json and prints a
table.

    python frontends/pytorch/bench/task_chain_probe.py --out OUT [--calls 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict

os.environ.setdefault("GPUOS_TORCH_TRACE", str(1 << 20))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_events  # noqa: E402
import workloads  # noqa: E402

import gpuos  # noqa: E402


class LayerNormChain(torch.nn.Module):
    def __init__(self, count: int):
        super().__init__()
        self.norms = torch.nn.ModuleList([torch.nn.LayerNorm(256) for _ in range(count)])

    def forward(self, x):
        for norm in self.norms:
            x = norm(x)
        return x


class SoftmaxChain(torch.nn.Module):
    def __init__(self, count: int):
        super().__init__()
        self.count = count

    def forward(self, x):
        for _ in range(self.count):
            x = torch.softmax(x, dim=-1)
        return x


class Alternating(torch.nn.Module):
    def __init__(self, pairs: int):
        super().__init__()
        self.norms = torch.nn.ModuleList([torch.nn.LayerNorm(256) for _ in range(pairs)])

    def forward(self, x):
        for norm in self.norms:
            x = torch.softmax(norm(x), dim=-1)
        return x


class LinearChain(torch.nn.Module):
    def __init__(self, count: int):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(256, 256) for _ in range(count)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _cases():
    return [("ln_chain8", lambda: LayerNormChain(8)),
            ("softmax_chain8", lambda: SoftmaxChain(8)),
            ("ln_softmax_alt", lambda: Alternating(4)),
            ("linear_chain4", lambda: LinearChain(4)),
            ("mlp_b1", lambda: workloads.Mlp())]


def _positions(trace_path: str, calls: int) -> dict:
    by_submission = {}
    for sequence, events in trace_events.newest_submissions(trace_path, calls).items():
        by_submission[sequence] = defaultdict(list)
        for e in events:
            by_submission[sequence][e["args"]["task"]].append(e)
    durations, gaps, helper_lag, names, spans = (defaultdict(list), defaultdict(list),
                                                 defaultdict(list), {}, [])
    for tasks in by_submission.values():
        order = sorted(tasks, key=lambda t: min(e["ts"] for e in tasks[t]))
        previous_end = None
        first_start = min(e["ts"] for e in tasks[order[0]])
        last_end = 0.0
        for position, task in enumerate(order):
            tiles = tasks[task]
            names[position] = tiles[0]["name"]
            start = min(e["ts"] for e in tiles)
            end = max(e["ts"] + e["dur"] for e in tiles)
            last_end = max(last_end, end)
            durations[position] += [e["dur"] for e in tiles]
            helper_lag[position].append(max(e["ts"] for e in tiles) - start)
            if previous_end is not None:
                gaps[position].append(start - previous_end)
            previous_end = end
        spans.append(last_end - first_start)
    rows = []
    for position in sorted(names):
        rows.append({"position": position, "operator": names[position],
                     "tiles": len(durations[position]) // max(len(by_submission), 1),
                     "tile_median_us": statistics.median(durations[position]),
                     "tile_min_us": min(durations[position]),
                     "gap_median_us": statistics.median(gaps[position]) if gaps[position] else None,
                     "last_tile_start_us": statistics.median(helper_lag[position])})
    return {"device_span_us": statistics.median(spans) if spans else None, "tasks": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for task_chain_probe.json")
    parser.add_argument("--calls", type=int, default=100, help="timed calls per case")
    parser.add_argument("--suffix", default="", help="appended to the JSON file's name")
    args = parser.parse_args()
    device = trace_events.cuda_device_or_skip(args.out)
    if device is None:
        return 0
    torch.manual_seed(0)
    results = []
    for name, make in _cases():
        module = make().to(device).eval().requires_grad_(False)
        x = torch.randn(1, 256, device=device)
        compiled = gpuos.compile(module)
        stream = torch.cuda.current_stream(device)
        wall, call, sync = [], [], []
        with torch.no_grad():
            expected = module(x)
            got = compiled(x)
            correct = bool(torch.allclose(got, expected, rtol=1e-4, atol=1e-4))
            for i in range(20 + args.calls):
                start = time.perf_counter()
                compiled(x)
                returned = time.perf_counter()
                stream.synchronize()
                if i >= 20:
                    end = time.perf_counter()
                    wall.append((end - start) * 1e6)
                    call.append((returned - start) * 1e6)
                    sync.append((end - returned) * 1e6)
        trace = os.path.join(args.out, f"chain_probe_{name}.json")
        gpuos.export_trace(trace)
        summary = _positions(trace, args.calls)
        summary.update(case=name, correct=correct, wall_us=statistics.median(wall),
                       call_us=statistics.median(call), sync_us=statistics.median(sync),
                       blocks=os.environ.get("GPUOS_TORCH_BLOCKS", "one per SM"))
        results.append(summary)
        print(f"{name:16s} correct {correct} wall {summary['wall_us']:7.1f} us (call "
              f"{summary['call_us']:5.1f}, synchronize {summary['sync_us']:5.1f})  device span "
              f"{summary['device_span_us'] or float('nan'):7.1f} us")
        for row in summary["tasks"]:
            gap = row["gap_median_us"]
            print(f"    {row['position']:2d} {row['operator']:18s} tiles {row['tiles']:2d}  tile "
                  f"{row['tile_median_us']:6.2f} us (min {row['tile_min_us']:5.2f})  gap before "
                  f"{'' if gap is None else f'{gap:5.2f}':>5s}  last tile starts "
                  f"+{row['last_tile_start_us']:4.2f}")
        os.remove(trace)
    trace_events.write_cases(os.path.join(args.out, f"task_chain_probe{args.suffix}.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
