"""The issue-5 PyTorch benchmark: every workload of workloads.py under every
variant of variants.py, checked against eager, then timed interleaved.
Writes OUT/pytorch_workloads.json and OUT/pytorch_workloads.png and prints a
table last.

    python frontends/pytorch/bench/run_workloads.py --out DIR      # GPU
    python frontends/pytorch/bench/run_workloads.py --smoke --out DIR  # CPU

Per case (one workload at one size):
1. Build every variant and call it once (first_call_ms: tracing,
   compilation, capture), then `--warmup` untimed calls each.
2. Correctness: write fresh random values into the shared inputs, compute
   eager's outputs, then for each variant poison its previous outputs with
   NaN (the caching allocator may hand that memory to the next call), call
   it and compare every output with eager's (same shape and dtype, allclose
   with the dtype's tolerance). `correct` is that result.
3. Timing, the same for every variant: host wall time (perf_counter_ns) from
   before the call until the synchronize of PyTorch's current stream returns
   after it; the stream object is looked up once per case, before the rounds
   (`--sync per-call`: looked up inside every timed call, as before session
   20: that lookup, Python, ran after a gpuos call, which returns with its
   results written, but beside a CUDA graph's work on the GPU;
   docs/pytorch.md, "Benchmarks").
   That is PyTorch's stream, not the whole device: gpuos's
   persistent worker runs on a non-blocking stream of its own (a device
   synchronize would wait for it to park); a gpuos call is ordered on
   PyTorch's current stream (the stream waits for its submission), so the
   synchronize returns once gpuos's results are written. `--rounds` rounds; in each, every variant
   (order rotated by one per round) makes `--block-warmup` untimed calls
   then `--block` timed calls. Medians and p10/p90 over rounds x block.
   A gpuos variant's row has `gpuos`: what its own blocks (untimed calls
   included) did per call, and how many worker grids were launched (the
   worker parks between blocks, after idle_park) and submissions ran as
   direct tiles.
`--smoke` runs on the CPU with tiny counts: eager and gpuos_compile with the
reference executor; the other variants are recorded as skipped with why.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any, Callable, Optional

import torch
import torch.utils._pytree as pytree

import floor
import gpuos
import report
import variants as variant_mod
import workloads

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2),
             torch.bfloat16: (2e-2, 2e-2)}  # (rtol, atol)
GPU_COUNTS = {"warmup": 20, "rounds": 40, "block": 10, "block_warmup": 2}
SMOKE_COUNTS = {"warmup": 1, "rounds": 2, "block": 2, "block_warmup": 0}
GPUOS_COUNTERS = ("submissions", "compiled_calls", "split_calls", "eager_calls", "tasks",
                  "traces", "guard_misses", "worker_launches", "direct_submissions",
                  "tile_launches")
GPUOS_COMPILED = ("gpuos_compile", "gpuos_unstitched")  # their rows count gpuos's work
# The runtimes' own counters (gpuos.stats()["runtimes"], summed over devices):
# grids launched (a parked worker relaunched), lone tiled submissions run
# as direct tiles (docs/runtime.md) and tasks run as tile launches (kernels
# of their own on PyTorch's stream, docs/pytorch.md).
RUNTIME_COUNTERS = {"worker_launches": "launches", "direct_submissions": "direct_submissions",
                    "tile_launches": "tile_launches"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


def _timed_sync(stream: Optional[torch.cuda.Stream], device: torch.device,
                mode: str) -> Callable[[], None]:
    """What a timed call ends with: the synchronize of PyTorch's current
    stream `stream` (None: not on CUDA, nothing), its Python object looked up
    once ("stream") or again at every call ("per-call")."""
    if stream is None:
        return lambda: None
    if mode == "per-call":
        return lambda: _sync(device)
    return stream.synchronize


def _percentile(sorted_values: list[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def _poison(outputs: Any) -> None:
    for t in pytree.tree_leaves(outputs):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            try:
                t.fill_(float("nan"))
            except RuntimeError:  # an output the variant does not let us write
                pass


def _compare(got: Any, expected: list[torch.Tensor]) -> tuple[bool, Optional[float], str]:
    leaves = pytree.tree_leaves(got)
    if len(leaves) != len(expected):
        return False, None, f"{len(leaves)} outputs, eager has {len(expected)}"
    worst = 0.0
    for i, (g, e) in enumerate(zip(leaves, expected)):
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype:
            return False, None, f"output {i}: {getattr(g, 'shape', type(g))} " \
                                f"{getattr(g, 'dtype', '')} vs eager {e.shape} {e.dtype}"
        rtol, atol = TOLERANCE.get(e.dtype, (0.0, 0.0))
        if e.numel():
            worst = max(worst, (g.double() - e.double()).abs().max().item())
        if not torch.allclose(g, e, rtol=rtol, atol=atol):
            return False, worst, f"output {i} differs from eager (rtol {rtol}, atol {atol})"
    return True, worst, ""


def _gpuos_counters() -> dict:
    s = gpuos.stats()
    counters = {k: s.get(k, 0) for k in GPUOS_COUNTERS if k not in RUNTIME_COUNTERS}
    for k, runtime_key in RUNTIME_COUNTERS.items():
        counters[k] = sum(r.get(runtime_key, 0) for r in s.get("runtimes", {}).values())
    counters["fallbacks"] = dict(s.get("fallbacks", {}))
    counters["fallback_reasons"] = dict(s.get("fallback_reasons", {}))
    return counters


def _add_delta(total: Optional[dict], before: dict, after: dict) -> dict:
    """`total` plus what gpuos's counters did between `before` and `after`."""
    total = total or {k: 0 for k in GPUOS_COUNTERS} | {"fallbacks": {}}
    for k in GPUOS_COUNTERS:
        total[k] += after[k] - before[k]
    for k, v in after["fallbacks"].items():
        total["fallbacks"][k] = total["fallbacks"].get(k, 0) + v - before["fallbacks"].get(k, 0)
    total["fallback_reasons"] = after["fallback_reasons"]
    return total


def _gpuos_delta(delta: dict, calls: int) -> dict:
    """What one variant's timed blocks (`calls` calls) did, per call."""
    return {"calls": calls,
            "submissions_per_call": delta["submissions"] / calls if calls else None,
            "tasks_per_call": delta["tasks"] / calls if calls else None,
            "compiled_calls": delta["compiled_calls"], "split_calls": delta["split_calls"],
            "eager_calls": delta["eager_calls"], "traces": delta["traces"],
            "worker_launches": delta["worker_launches"],
            "direct_submissions": delta["direct_submissions"],
            "tile_launches": delta["tile_launches"],
            "fallbacks": {k: v for k, v in delta["fallbacks"].items() if v},
            "fallback_reasons": delta["fallback_reasons"]}


def run_case(case: workloads.Case, names: list[str], device: torch.device, counts: dict,
             smoke: bool, seed: int, sync_mode: str = "stream") -> list[dict]:
    if device.type == "cuda":
        # Each case compiles afresh; keeps dynamo's cache (and its recompile limit) small.
        importlib.import_module("torch._dynamo").reset()
    module = workloads.build(case, device, seed)
    generator = torch.Generator().manual_seed(seed + 1)
    inputs = case.make_inputs(device, generator)
    built = []
    with torch.no_grad():
        for name in names:
            try:
                built.append(variant_mod.make(name, module, inputs, device, smoke))
            except Exception as error:  # a failing baseline is a result, not a crash
                built.append(variant_mod.Variant(name, error=f"{type(error).__name__}: {error}"))
        live = [v for v in built if v.call is not None and v.error is None]
        for v in list(live):
            try:
                for _ in range(counts["warmup"]):
                    v.call()
                _sync(device)
            except Exception as error:
                v.error = f"warm-up: {type(error).__name__}: {error}"
                live.remove(v)
        for fresh, t in zip(case.make_inputs(device, generator), inputs):
            t.copy_(fresh)
        expected = [t.clone() for t in pytree.tree_leaves(module(*inputs))]
        checks = {}
        for v in list(live):
            try:
                _poison(v.call())
                checks[v.name] = _compare(v.call(), expected)
                _sync(device)
            except Exception as error:
                v.error = f"check: {type(error).__name__}: {error}"
                live.remove(v)
        samples = {v.name: [] for v in live}
        counted = {}  # variant -> gpuos's counters over its own blocks
        stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
        timed_sync = _timed_sync(stream, device, sync_mode)
        for r in range(counts["rounds"]):
            shift = r % len(live) if live else 0
            for v in live[shift:] + live[:shift]:
                # Both gpuos variants: worker_launches per block showed no
                # park inside calls until session 26's decoder_step unstitched.
                before = _gpuos_counters() if v.name in GPUOS_COMPILED else None
                for _ in range(counts["block_warmup"]):
                    v.call()
                _sync(device)
                if stream is not None and torch.cuda.current_stream(device) != stream:
                    raise RuntimeError(f"{v.name} changed PyTorch's current stream")
                for _ in range(counts["block"]):
                    start = time.perf_counter_ns()
                    v.call()
                    timed_sync()
                    samples[v.name].append((time.perf_counter_ns() - start) / 1e3)
                if before is not None:
                    counted[v.name] = _add_delta(counted.get(v.name), before, _gpuos_counters())
    rows = []
    for v in built:
        row = {"workload": case.workload, **case.params, "case": case.name, "variant": v.name,
               "dtype": str(case.dtype).replace("torch.", ""), "median_us": None, "p10_us": None,
               "p90_us": None, "iterations": 0, "correct": None,
               "first_call_ms": v.first_call_ms}
        if v.skipped:
            row["skipped"] = v.skipped
        if v.error:
            row["error"], row["correct"] = v.error, False
        if v.name in samples and samples[v.name]:
            values = sorted(samples[v.name])
            ok, worst, why = checks[v.name]
            row.update(median_us=_percentile(values, 0.5), p10_us=_percentile(values, 0.1),
                       p90_us=_percentile(values, 0.9), min_us=values[0],
                       iterations=len(values), correct=ok, max_abs_err=worst)
            if why:
                row["mismatch"] = why
        if v.name in counted:
            row["gpuos"] = dict(_gpuos_delta(counted[v.name], len(samples[v.name])
                                             + counts["rounds"] * counts["block_warmup"]),
                                executor=v.info.get("executor"))
        if v.name == "gpuos_batching" and v.info:
            # What one replayed call did (measured before timing): a number
            # that silently came from eager shows as learned or materialized ops.
            row["batching"] = v.info
        rows.append(row)
    return rows


def commit_label(directory: str) -> str:
    """GPUOS_COMMIT when set; else the checkout's HEAD, with "-modified"
    appended when tracked files differ from it (local edits, or a copy of a
    newer tree beside an older .git, as on the GPU machine): a result is
    never labelled with a commit whose code it did not run. "unknown" without
    git or a checkout."""
    commit = os.environ.get("GPUOS_COMMIT")
    if commit:
        return commit
    try:
        head = subprocess.run(["git", "-C", directory, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0 or not head.stdout.strip():
            return "unknown"
        changed = subprocess.run(["git", "-C", directory, "status", "--porcelain",
                                  "--untracked-files=no"], capture_output=True, text=True,
                                 timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    modified = changed.returncode != 0 or changed.stdout.strip() != ""
    return head.stdout.strip() + ("-modified" if modified else "")


def _environment(device: torch.device) -> dict:
    env = {"commit": commit_label(HERE), "torch": torch.__version__, "cuda": torch.version.cuda,
           "python": platform.python_version(), "gpuos": getattr(gpuos, "__version__", None),
           "device": platform.processor() or platform.machine(), "driver": None}
    if device.type == "cuda":
        env["device"] = torch.cuda.get_device_name(device)
        try:
            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i",
                 str(device.index or 0)], capture_output=True, text=True,
                timeout=20).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            pass
    return env


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT"),
                        help="directory for pytorch_workloads.json/.png (default: $OUT)")
    parser.add_argument("--smoke", action="store_true", help="CPU plumbing check, tiny counts")
    parser.add_argument("--cases", default="", help="only cases whose name contains one of "
                        "these comma-separated strings")
    parser.add_argument("--variants", default=",".join(variant_mod.VARIANTS))
    for name in GPU_COUNTS:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=None,
                            help=f"default {GPU_COUNTS[name]} ({SMOKE_COUNTS[name]} with --smoke)")
    parser.add_argument("--budget-s", type=float, default=None, help="cases not started within "
                        "this many seconds are recorded as skipped (default: no limit)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sync", choices=("stream", "per-call"), default="stream",
                        help="the stream synchronized after each timed call: looked up once "
                        "per case (default) or inside every timed call (before session 20)")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error("--out DIR is required when $OUT is not set")
    return args


def main(argv: Optional[list[str]] = None) -> dict:
    args = parse_args(argv)
    counts = dict(SMOKE_COUNTS if args.smoke else GPU_COUNTS)
    for name in counts:
        if getattr(args, name) is not None:
            counts[name] = getattr(args, name)
    threads = torch.get_num_threads()
    if args.smoke:
        device = torch.device("cpu")
        torch.set_num_threads(1)  # small ops; a shared CPU makes more threads much slower
    elif torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        sys.exit("run_workloads: no CUDA device; use --smoke for the CPU plumbing check")
    names = [n for n in args.variants.split(",") if n]
    filters = [f for f in args.cases.split(",") if f]
    cases = [c for c in workloads.cases() if not filters or any(f in c.name for f in filters)]
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "pytorch_workloads.json")
    doc = {"benchmark": "pytorch_workloads", **_environment(device), "smoke": args.smoke,
           "method": {**counts, "timed_calls_per_variant": counts["rounds"] * counts["block"],
                      "timing": "host wall time of one call until the synchronize of PyTorch's "
                      "current stream returns (its torch.cuda.Stream looked up "
                      + ("once per case, before the rounds" if args.sync == "stream" else
                         "inside every timed call") + "; gpuos: the call is ordered on that "
                      "stream, which waits for its submission); rounds interleave the "
                      "variants (order rotated), each makes block_warmup untimed then block "
                      "timed calls; median and p10/p90 over all timed calls",
                      "correctness": "fresh random inputs, previous outputs poisoned with NaN, "
                      "every output allclose to eager's (f32: rtol 1e-4, atol 1e-4)",
                      "cuda_graph": "replay only, inputs are the captured buffers (no copy)",
                      "torch_compile": "dynamic=False; reduce-overhead calls "
                      "torch.compiler.cudagraph_mark_step_begin() before each call"},
           "workloads": {c.workload: c.notes for c in cases}, "cases": [], "targets": [],
           "complete": False}
    try:
        return _run(args, doc, cases, names, device, counts, json_path)
    finally:
        torch.set_num_threads(threads)


def _host_cpu(cpuinfo: str = "/proc/cpuinfo") -> Optional[str]:
    """The host's CPU model (Linux: `cpuinfo`'s first "model name"; None
    where there is none or it is empty). Eager's times, host-bound at these
    sizes, differ by up to 2x between GPU instances of one kind (attention
    seq 128 63.8-101.0 us in sessions 29-32): the document says which host
    ran them."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return None


def _host_load() -> Optional[float]:
    """The host's 1-minute load average (None where the OS has none): a run
    whose host was busy (another process compiling, say) shows it, since
    eager's and the compiled variants' host parts slow down with it."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _run(args, doc, cases, names, device, counts, json_path) -> dict:
    start = time.monotonic()
    doc["host_load"] = {"cpus": os.cpu_count(), "cpu_model": _host_cpu(),
                        "at_start": _host_load(), "at_case_start": {}}
    for case in cases:
        if args.budget_s is not None and time.monotonic() - start > args.budget_s:
            reason = f"time budget of {args.budget_s:g} s exhausted before this case"
            doc["cases"] += [{"workload": case.workload, **case.params, "case": case.name,
                              "variant": n, "median_us": None, "p10_us": None, "p90_us": None,
                              "iterations": 0, "correct": None, "skipped": reason}
                             for n in names]
            continue
        case_start = time.monotonic()
        doc["host_load"]["at_case_start"][case.name] = _host_load()
        doc["cases"] += run_case(case, names, device, counts, args.smoke, args.seed, args.sync)
        print(f"[bench] {case.name}: {time.monotonic() - case_start:.1f} s", flush=True)
        with open(json_path, "w") as f:  # a partial result survives a time-out
            json.dump(doc, f, indent=2)
    report.add_speedups(doc["cases"])
    doc["targets"] = report.targets(doc["cases"])
    # Each case's least traffic and floor on this device, and each variant's
    # median over it (floor.py; computed on the CPU after the timing). A
    # diagnostic: its failure is recorded, never costs the run its document.
    try:
        doc["floors"] = floor.floors(doc)
    except Exception as error:  # noqa: BLE001
        doc["floors"] = []
        doc["floors_error"] = f"{type(error).__name__}: {error}"
    doc["elapsed_s"] = time.monotonic() - start
    doc["host_load"]["at_end"] = _host_load()
    doc["complete"] = True
    with open(json_path, "w") as f:
        json.dump(doc, f, indent=2)
    why_not = report.plot(doc, os.path.join(args.out, "pytorch_workloads.png"))
    if why_not:
        print(why_not)
    print(report.table(doc), flush=True)
    print(doc.get("floors_error") or floor.table(doc["floors"], doc["device"]), flush=True)
    return doc


if __name__ == "__main__":
    main()
