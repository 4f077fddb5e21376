"""gpuos for PyTorch: compiled replay of PyTorch functions on the gpuos
persistent-kernel runtime (docs/pytorch.md).

    import torch, gpuos
    f = gpuos.compile(lambda x: torch.relu(x * 2 + 1))
    y = f(torch.randn(64, 64, device="cuda"))      # traced, lowered, one submission
    y = f(torch.randn(64, 64, device="cuda"))      # replayed: one submission
    print(gpuos.stats())

`torch.compile(model, backend="gpuos")` works once the package is installed
(entry point), or with `backend=gpuos.backend`. Importing needs no GPU; a
function whose inputs are not on a CUDA device, or whose graph has an op the
standard packs cannot run, runs eagerly and is counted in stats().

`with gpuos.batching(): y = model(x)` records the thread's aten ops in C++:
the first time a sequence of ops is seen it runs eagerly and is learned (lowered
to a program at the flush that ends it); the next time the same ops only
allocate their results and the flush submits the program once. Ops gpuos
cannot run flush the pending ones and run eagerly (gpuos.batching_stats()).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Sequence

import torch

from . import _runtime
from ._aten import COVERAGE, TABLE
from ._batching import batching, batching_stats, reset_batching_stats, synchronize
from ._compile import DEFAULT_CACHE_SIZE, CompiledFunction, backend, trace
from ._lowering import Unsupported, lower as _lower
from ._program import Program

__all__ = ["compile", "backend", "stats", "reset_stats", "lower", "available", "coverage",
           "batching", "batching_stats", "reset_batching_stats", "synchronize", "Program", "Unsupported",
           "CompiledFunction", "export_trace"]
__version__ = "0.1.0"


def compile(fn: Callable, *, cache_size: int = DEFAULT_CACHE_SIZE,
            executor: str = "gpuos") -> CompiledFunction:
    """Returns `fn` compiled for gpuos: traced at its first call for each
    input layout (at most `cache_size` layouts kept), replayed with one
    submission per call (one per segment when the graph has ops gpuos cannot
    run, which run eagerly in between). Inference only: calls that need
    autograd run eagerly. `executor="reference"` runs the programs with the
    CPU reference interpreter instead (tests, no GPU needed)."""
    return CompiledFunction(fn, cache_size, executor)


def lower(fn: Callable, *example_inputs: torch.Tensor) -> Program:
    """Traces `fn` (or takes a GraphModule) and lowers it to a task program,
    without running anything on gpuos. Works on the CPU (tests, inspection)."""
    gm = fn if isinstance(fn, torch.fx.GraphModule) and _is_aten(fn) else trace(fn, example_inputs)
    return _lower(gm, example_inputs)


def _is_aten(gm: torch.fx.GraphModule) -> bool:
    return all(n.op != "call_function" or str(n.target).startswith("aten.") or
               n.target.__name__ == "getitem" for n in gm.graph.nodes)


def stats() -> dict[str, Any]:
    """Submissions, tasks, eager fallbacks by op name (and why), traces, guard
    misses, and each open runtime's own counters."""
    return _runtime.snapshot()


def export_trace(path: str, device: int = 0) -> None:
    """Writes the task timeline of device `device`'s runtime as a Chrome trace
    (chrome://tracing, Perfetto): one event per task with its operator and
    worker block. Needs GPUOS_TORCH_TRACE=<records> set before the first gpuos
    call; the device keeps the newest records only."""
    _runtime.runtime(device).export_trace(path)


def reset_stats() -> None:
    _runtime.STATS.reset()


def available(device: int = 0) -> tuple[bool, str]:
    """(True, "") when gpuos can run on CUDA device `device`, else (False, why).
    Opens the runtime (the first time builds or loads the kernel image)."""
    if _runtime._C is None:
        return False, _runtime.EXTENSION_ERROR or "no extension"
    try:
        _runtime.runtime(device)
    except (RuntimeError, ValueError) as error:  # ValueError: a switch set to neither 0 nor 1
        return False, str(error)
    return True, ""


def coverage() -> dict[str, tuple[str, ...]]:
    """aten overload -> the standard-pack operators its lowering may use."""
    return dict(COVERAGE)


def _register_dynamo_backend() -> None:
    # The entry point (setup.py) covers installed packages; this covers a
    # source checkout on sys.path once torch._dynamo is loaded.
    if "torch._dynamo" in sys.modules:
        try:
            from torch._dynamo.backends.registry import _BACKENDS, register_backend

            if "gpuos" not in _BACKENDS:
                register_backend(name="gpuos", compiler_fn=backend)
        except Exception:  # private API; the entry point still works
            pass


_register_dynamo_backend()
