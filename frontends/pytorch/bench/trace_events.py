"""Reading the Chrome trace that gpuos.export_trace writes, and timing calls
the way the benchmark does (diagnostics of frontends/pytorch/bench:
profile_tasks.py, stitch_profile.py, task_chain_probe.py)."""

from __future__ import annotations

import json
import time
from collections import defaultdict


def newest_submissions(trace_path: str, count: int) -> dict:
    """The task records ("ph": "X" events) of the newest `count` submissions
    of the trace, by submission sequence (timed calls: one submission each)."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    newest = set(sorted({e["args"]["sequence"] for e in events})[-count:])
    by_submission = defaultdict(list)
    for e in events:
        if e["args"]["sequence"] in newest:
            by_submission[e["args"]["sequence"]].append(e)
    return dict(by_submission)


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
