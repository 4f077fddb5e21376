"""Reading the Chrome trace that gpuos.export_trace writes, and timing calls
the way the benchmark does (diagnostics of frontends/pytorch/bench:
profile_tasks.py, stitch_profile.py, task_chain_probe.py, park_probe.py)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import defaultdict


def newest_submissions(trace_path: str, count: int, category: str = "task") -> dict:
    """The records ("ph": "X" events) of category `category` ("task": tiles;
    "queue": the admit and complete records, and helpers' help records) of the newest `count`
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


def relaunch_report(calls: list[dict], submissions: dict, idle_park_us: float) -> dict:
    """Joins the host's record of each call (dicts with round, index, start_ns,
    end_ns; in call order) with the trace's task records of the same calls'
    submissions ({sequence: [events]}, one submission a call, in sequence
    order) and summarizes the relaunches. A call ran on a new grid when its
    records name a grid above every earlier call's; `calls_on_few_blocks`
    lists the calls that ran on fewer than half the median call's blocks (a
    call a parking grid's last block ran alone shows there)."""
    sequences = sorted(submissions)[-len(calls):]
    if len(sequences) != len(calls):
        raise ValueError(f"{len(calls)} calls but the trace holds {len(sequences)} submissions "
                         "with task records: raise GPUOS_TORCH_TRACE or make fewer calls")
    rows, newest_grid, previous_end = [], 0, None
    for call, sequence in zip(calls, sequences):
        events = submissions[sequence]
        grids = {e["args"].get("grid", 0) for e in events}
        if 0 in grids:
            raise ValueError("the trace's records carry no grid (a runtime older than "
                             "args.grid)")
        grid = max(grids)
        start = min(e["ts"] for e in events)
        row = {"round": call["round"], "index": call["index"], "sequence": sequence,
               "wall_us": (call["end_ns"] - call["start_ns"]) / 1e3,
               "gap_us": None if previous_end is None
               else (call["start_ns"] - previous_end) / 1e3,
               "grid": grid, "grids": len(grids), "new_grid": grid > newest_grid,
               "blocks": len({e["tid"] for e in events}),
               "span_us": max(e["ts"] + e["dur"] for e in events) - start}
        newest_grid = max(newest_grid, grid)
        previous_end = call["end_ns"]
        rows.append(row)
    inside = [r for r in rows if r["index"] > 0]
    relaunched = [r for r in inside if r["new_grid"]]
    blocks = [r["blocks"] for r in rows]
    few = statistics.median(blocks) / 2
    return {
        "calls": len(rows),
        "median_wall_us": statistics.median(r["wall_us"] for r in rows),
        "median_blocks": statistics.median(blocks),
        "new_grids": sum(r["new_grid"] for r in rows),
        "new_grids_at_round_start": sum(r["new_grid"] for r in rows if r["index"] == 0),
        "new_grids_inside_rounds": len(relaunched),
        # Inside a round the host waited less than idle_park before these:
        # the grid should not have parked.
        "new_grids_after_short_gap": sum(r["gap_us"] < idle_park_us for r in relaunched),
        "gaps_before_new_grids_us": sorted(round(r["gap_us"], 1) for r in relaunched),
        "median_gap_inside_rounds_us": (statistics.median(r["gap_us"] for r in inside)
                                        if inside else None),
        "calls_on_several_grids": sum(r["grids"] > 1 for r in rows),
        "calls_on_few_blocks": [{k: r[k] for k in ("round", "index", "wall_us", "blocks")}
                                for r in rows if r["blocks"] < few],
        "rows": rows,
    }


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
