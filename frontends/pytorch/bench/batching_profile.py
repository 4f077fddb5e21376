"""Where a replayed gpuos.batching() call spends its host time, on a GPU
(diagnostics for docs/pytorch.md, "Transparent batching"; not a test).

On the bench's chain100 (x * 0.999, x + 0.001 alternating, 64x64 f32, CUDA)
it times, per op, median of --repeats chains, interleaved rounds:

    eager          plain PyTorch, synchronized after the chain
    intercept      gpuos.batching(record=False): the C++ fallback counts each
                   op and redispatches it (no recording)
    replay_ops     inside gpuos.batching(), a learned sequence: the ops only
                   (each allocates its result), timed before the block exits
    replay_flush   leaving that block (one submission) until the stream is
                   synchronized
    replay_total   the whole replayed call, as bench/run_workloads.py times it
    empty_like     torch.empty_like(x) from Python (what one result's
                   allocation costs through the dispatcher)

and, under "after_idle", a gpuos.compile'd chain100 call after the host has
been idle (busy-waiting) for 0, 100, 300 and 1000 us since the previous
call returned: what a call costs when the worker may have parked, with the
runtime's launch and park counts over those calls.

    python frontends/pytorch/bench/batching_profile.py [--repeats 200] [--out file.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

import gpuos

OPS = 100


def chain(x: torch.Tensor) -> torch.Tensor:
    for i in range(OPS):
        x = x + 0.001 if i % 2 else x * 0.999
    return x


def _runtime_counters() -> dict:
    runtimes = gpuos.stats()["runtimes"]
    return next(iter(runtimes.values()), {}) if runtimes else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--out", help="write the JSON here too")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device (this profile needs a GPU)")
        return 0
    device = torch.device("cuda")
    stream = torch.cuda.current_stream(device)
    x = torch.randn(64, 64, device=device)
    expected = chain(x)

    def eager() -> dict:
        start = time.perf_counter_ns()
        chain(x)
        stream.synchronize()
        return {"eager": time.perf_counter_ns() - start}

    def intercept() -> dict:
        start = time.perf_counter_ns()
        with gpuos.batching(record=False):
            chain(x)
        stream.synchronize()
        return {"intercept": time.perf_counter_ns() - start}

    def replay() -> dict:
        start = time.perf_counter_ns()
        block = gpuos.batching()
        block.__enter__()
        y = chain(x)
        ops_done = time.perf_counter_ns()
        block.__exit__(None, None, None)
        stream.synchronize()
        end = time.perf_counter_ns()
        del y
        return {"replay_ops": ops_done - start, "replay_flush": end - ops_done,
                "replay_total": end - start}

    def empty_like() -> dict:
        start = time.perf_counter_ns()
        for _ in range(OPS):
            torch.empty_like(x)
        return {"empty_like": time.perf_counter_ns() - start}

    compiled = gpuos.compile(chain)
    after_idle = {}
    for gap_us in (0, 100, 300, 1000):
        before = _runtime_counters()
        times = []
        for _ in range(args.repeats // 2):
            until = time.perf_counter_ns() + gap_us * 1000
            while time.perf_counter_ns() < until:
                pass
            start = time.perf_counter_ns()
            compiled(x)
            stream.synchronize()
            times.append((time.perf_counter_ns() - start) / 1e3)
        after = _runtime_counters()
        after_idle[f"{gap_us}us"] = {
            "median_us": round(statistics.median(times), 2),
            "launches": after.get("launches", 0) - before.get("launches", 0),
            "parks": after.get("parks", 0) - before.get("parks", 0), "calls": len(times)}
    with gpuos.batching():
        got = chain(x)
    with gpuos.batching():
        got = chain(x)
    stream.synchronize()
    if not torch.allclose(got, expected, rtol=1e-5, atol=1e-5):
        print("FAILED: the replayed chain differs from eager")
        return 1
    gpuos.reset_batching_stats()
    samples: dict[str, list[float]] = {}
    for _ in range(3):
        for variant in (eager, intercept, replay, empty_like):
            for _ in range(10):
                variant()
            for _ in range(args.repeats):
                for name, ns in variant().items():
                    samples.setdefault(name, []).append(ns / 1e3)
    stats = gpuos.batching_stats()
    before = _runtime_counters()
    for _ in range(50):
        replay()
    after = _runtime_counters()
    replay_worker = {k: after.get(k, 0) - before.get(k, 0) for k in ("launches", "parks")}
    replay_worker["calls"] = 50
    per_op = {name: statistics.median(v) / OPS for name, v in samples.items()}
    per_op["replay_flush"] *= OPS  # one per call, not per op
    result = {
        "commit": os.environ.get("GPUOS_COMMIT"),
        "device": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "ops_per_chain": OPS,
        "repeats": args.repeats,
        "us_per_op": {k: round(v, 3) for k, v in per_op.items() if k != "replay_flush"},
        "flush_us_per_call": round(per_op["replay_flush"], 2),
        "replay_speedup_vs_eager": round(statistics.median(samples["eager"]) /
                                         statistics.median(samples["replay_total"]), 3),
        "after_idle": after_idle,
        "replay_worker": replay_worker,
        "batching_stats": {k: stats[k] for k in ("replayed_ops", "submissions", "divergences",
                                                 "materialized_ops", "liveness_misses",
                                                 "keep_warms")},
        "flush_us_per_submission": {
            part: round(stats[f"flush_{part}_us"] / max(stats["submissions"], 1), 2)
            for part in ("liveness", "submit", "release")},
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
