"""How each variant runs a case: `make(name, module, inputs, device, smoke)`
returns a Variant whose `call()` runs the case once on the shared `inputs`
(the same tensors for every variant; new values are written into them in
place) and returns its outputs, or a Variant with `skipped` set and no call.

    eager             module(*inputs)
    cuda_graph        torch.cuda.CUDAGraph captured on `inputs` (after 3
                      warm-up calls on a side stream); a call is g.replay()
                      and returns the graph's static outputs. The inputs are
                      the captured buffers, so no input copy is timed (the
                      best case for CUDA graphs).
    torch_compile     torch.compile(module, dynamic=False), default mode
    torch_compile_ro  torch.compile(module, mode="reduce-overhead",
                      dynamic=False); each call is preceded by
                      torch.compiler.cudagraph_mark_step_begin()
    gpuos_batching    `with gpuos.batching(): module(*inputs)`: the first call
                      learns the op sequence (eager), later calls replay it as
                      one gpuos submission per flush (runs when
                      gpuos._batching.RECORDS is true, on a GPU only)
    gpuos_compile     gpuos.compile(module) (smoke: executor="reference",
                      the CPU reference interpreter)
    gpuos_unstitched  the same with GPUOS_STITCH=0 while its program is
                      built: one task per operator instead of one stitched
                      task (a diagnostic of what stitching changes; GPU only)

dynamic=False: every case has fixed shapes; without it, the second batch
size of the same module would be compiled with a symbolic batch dimension.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

import gpuos

VARIANTS = ("eager", "cuda_graph", "torch_compile", "torch_compile_ro", "gpuos_batching",
            "gpuos_compile", "gpuos_unstitched")
NOT_IMPLEMENTED_BATCHING = ("gpuos.batching() only intercepts ops so far (counted in C++, then run "
                            "eagerly); recording and batched submission to gpuos are not built, "
                            "so there is nothing of gpuos to measure")


@dataclass
class Variant:
    name: str
    call: Optional[Callable[[], Any]] = None
    skipped: Optional[str] = None  # why it was not run (not a failure)
    error: Optional[str] = None  # building or the first call failed
    first_call_ms: Optional[float] = None  # the first call (tracing, compilation, capture)
    info: dict = field(default_factory=dict)


def _batching_records() -> bool:
    return hasattr(gpuos, "batching") and getattr(gpuos._batching, "RECORDS", False)


def _first_call(variant: Variant, device: torch.device) -> Variant:
    start = time.perf_counter()
    variant.call()
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    variant.first_call_ms = (time.perf_counter() - start) * 1e3
    return variant


def _cuda_graph(module, inputs, device) -> Variant:
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    start = time.perf_counter()
    with torch.cuda.stream(side):
        for _ in range(3):
            module(*inputs)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # thread_local: gpuos's runtime may call CUDA from its own threads meanwhile.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        static_outputs = module(*inputs)
    torch.cuda.current_stream(device).synchronize()

    def call():
        graph.replay()
        return static_outputs

    return Variant("cuda_graph", call, first_call_ms=(time.perf_counter() - start) * 1e3,
                   info={"graph": graph})


def _torch_compile(module, inputs, device, mode: Optional[str]) -> Variant:
    name = "torch_compile" if mode is None else "torch_compile_ro"
    options = {"dynamic": False} if mode is None else {"dynamic": False, "mode": mode}
    compiled = torch.compile(module, **options)
    if mode is None:
        return _first_call(Variant(name, lambda: compiled(*inputs)), device)

    def call():
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(*inputs)

    return _first_call(Variant(name, call), device)


def _gpuos_batching(module, inputs, device) -> Variant:
    def call():
        with gpuos.batching():
            return module(*inputs)

    variant = _first_call(Variant("gpuos_batching", call), device)
    gpuos.reset_batching_stats()
    call()  # the second call replays: what each timed call does
    torch.cuda.current_stream(device).synchronize()
    s = gpuos.batching_stats()
    variant.info = {key: s[key] for key in ("replayed_ops", "learned_ops", "submissions", "tasks",
                                             "materialized_ops", "fallbacks", "flushes_by_reason")}
    return variant


def _gpuos_compile(module, inputs, device, smoke: bool, stitch: bool = True) -> Variant:
    executor = "reference" if smoke else "gpuos"
    compiled = gpuos.compile(module, executor=executor)
    variant = Variant("gpuos_compile" if stitch else "gpuos_unstitched",
                      lambda: compiled(*inputs), info={"executor": executor})
    if stitch:
        return _first_call(variant, device)
    before = os.environ.get("GPUOS_STITCH")
    os.environ["GPUOS_STITCH"] = "0"  # read when the first call builds the program
    try:
        return _first_call(variant, device)
    finally:
        if before is None:
            del os.environ["GPUOS_STITCH"]
        else:
            os.environ["GPUOS_STITCH"] = before


def make(name: str, module: torch.nn.Module, inputs: list, device: torch.device,
         smoke: bool) -> Variant:
    """The variant `name` for this case, built and called once (first_call_ms)."""
    on_cuda = device.type == "cuda"
    if name == "eager":
        return _first_call(Variant(name, lambda: module(*inputs)), device)
    if name == "gpuos_batching" and not _batching_records():
        return Variant(name, skipped=NOT_IMPLEMENTED_BATCHING)
    if name == "gpuos_compile" and smoke:
        return _gpuos_compile(module, inputs, device, smoke=True)
    if name == "gpuos_unstitched" and smoke:
        return Variant(name, skipped="--smoke: the reference executor does not stitch")
    if smoke:
        return Variant(name, skipped="--smoke: CPU run, only eager and gpuos_compile "
                       "(reference executor) are run")
    if not on_cuda:
        return Variant(name, skipped=f"needs a CUDA device (inputs on {device})")
    if name == "cuda_graph":
        return _cuda_graph(module, inputs, device)
    if name == "torch_compile":
        return _torch_compile(module, inputs, device, None)
    if name == "torch_compile_ro":
        return _torch_compile(module, inputs, device, "reduce-overhead")
    if name == "gpuos_batching":
        ok, why = gpuos.available(device.index or 0)
        if not ok:
            return Variant(name, skipped=f"gpuos cannot run here: {why}")
        return _gpuos_batching(module, inputs, device)
    if name in ("gpuos_compile", "gpuos_unstitched"):
        ok, why = gpuos.available(device.index or 0)
        if not ok:
            return Variant(name, skipped=f"gpuos cannot run here: {why}")
        return _gpuos_compile(module, inputs, device, smoke=False,
                              stitch=name == "gpuos_compile")
    raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
