"""Reading the Chrome trace that gpuos.export_trace writes, and timing calls
the way the benchmark does (diagnostics of frontends/pytorch/bench:
profile_tasks.py, stitch_profile.py, task_chain_probe.py)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import defaultdict


def newest_submissions(trace_path: str, count: int, category: str = "task") -> dict:
    """The records ("ph": "X" events) of category `category` ("task": tiles;
    "queue": the admit and complete records) of the newest `count`
    submissions of the trace, by submission sequence (timed calls: one
    submission each)."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") == category]
    newest = set(sorted({e["args"]["sequence"] for e in events})[-count:])
    by_submission = defaultdict(list)
    for e in events:
        if e["args"]["sequence"] in newest:
            by_submission[e["args"]["sequence"]].append(e)
    return dict(by_submission)


def queue_breakdown(trace_path: str, count: int) -> dict:
    """Medians (us) over the newest `count` submissions that have both queue
    records of where the device's part of a submission goes: `admit` (claim
    until its first task is about to start: reading the record, copying the
    graph in), `to_first_tile` (claim until the first tile's start),
    `tiles` (first tile start until last tile end), `to_count` (last tile
    end until the last completion was counted), `complete` (counted until
    the completion word was stored), `device` (claim until stored), and
    `claim_gap` (the previous submission's completion word until this one's
    claim: the host's turnaround and the pick-up; over consecutive
    sequences that both have records), `blocks` (how many worker blocks ran
    a submission's tiles) and `blocks_min` (the fewest of any submission: 1
    for a tiled program shows a grid left with one block, docs/runtime.md,
    "Parking and relaunch")."""
    tasks = newest_submissions(trace_path, count)
    queue = newest_submissions(trace_path, count, "queue")
    parts = defaultdict(list)
    stored = {}  # sequence -> when its completion word was stored
    claimed = {}  # sequence -> when it was claimed
    for sequence, records in queue.items():
        admit = [r for r in records if r["name"] == "admit"]
        complete = [r for r in records if r["name"] == "complete"]
        tiles = tasks.get(sequence, [])
        if len(admit) != 1 or len(complete) != 1 or not tiles:
            continue
        a, c = admit[0], complete[0]
        stored[sequence] = c["ts"] + c["dur"]
        claimed[sequence] = a["ts"]
        first = min(t["ts"] for t in tiles)
        last = max(t["ts"] + t["dur"] for t in tiles)
        parts["admit"].append(a["dur"])
        parts["to_first_tile"].append(first - a["ts"])
        parts["tiles"].append(last - first)
        parts["to_count"].append(c["ts"] - last)
        parts["complete"].append(c["dur"])
        parts["device"].append(c["ts"] + c["dur"] - a["ts"])
        parts["blocks"].append(len({t["tid"] for t in tiles}))
    parts["claim_gap"] = [claimed[s] - stored[s - 1] for s in claimed if s - 1 in stored]
    result = {k: statistics.median(v) for k, v in parts.items() if v}
    if parts["blocks"]:
        result["blocks_min"] = min(parts["blocks"])
    result["submissions"] = len(parts["device"])
    return result


def time_calls(fn, inputs, device, calls: int) -> list[float]:
    """Host wall time (us) of `calls` calls of fn(*inputs), each until
    PyTorch's current stream of `device` is synchronized."""
    import torch

    stream = torch.cuda.current_stream(device)
    wall = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*inputs)
        stream.synchronize()
        wall.append((time.perf_counter() - start) * 1e6)
    return wall


def cuda_device_or_skip(out: str):
    """The device the diagnostics run on (cuda:0, with `out` created), or
    None after printing why they are skipped (no CUDA device)."""
    import torch

    if not torch.cuda.is_available():
        print("SKIPPED: needs a CUDA device", file=sys.stderr)
        return None
    os.makedirs(out, exist_ok=True)
    return torch.device("cuda", 0)


def write_cases(path: str, cases: list) -> None:
    """A diagnostic's JSON: the commit (GPUOS_COMMIT), the device and its cases."""
    import torch

    with open(path, "w") as f:
        json.dump({"commit": os.environ.get("GPUOS_COMMIT", "unknown"),
                   "device": torch.cuda.get_device_name(0), "cases": cases}, f, indent=1)
