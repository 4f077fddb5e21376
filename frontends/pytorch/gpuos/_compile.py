"""gpuos.compile and the torch.compile backend: trace once, lower, replay.

A call first tries the program of the previous call: its guards (device,
dtype, sizes, strides of every input) are checked in C++ by Program.run,
which then binds the inputs' pointers, submits the graph once and returns the
outputs. On a guard miss the inputs' layout is looked up in a bounded LRU
cache of programs; a new layout is traced (make_fx, aten level), lowered and
built. A graph with an op gpuos cannot run runs eagerly as a whole (no
splitting yet), and each of its ops is counted in gpuos.stats()["fallbacks"].
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
import torch.utils._pytree as pytree

from . import _runtime
from ._lowering import lower
from ._program import CONSTANT, INPUT, OUTPUT, Program

DEFAULT_CACHE_SIZE = 8


@dataclass
class _Entry:
    program: Any  # gpuos._C.Program, or None to run eagerly
    num_tasks: int = 0
    output_spec: Any = None
    single: bool = False  # the function returns one tensor
    aten_ops: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # why it runs eagerly
    lowered: Optional[Program] = None


def trace(fn: Callable, args: tuple) -> torch.fx.GraphModule:
    """`fn` traced at aten level on real inputs (runs it once)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def call(*inputs):  # make_fx would count fn's own default parameters as inputs
        return fn(*inputs)

    with torch.no_grad():
        return make_fx(call, tracing_mode="real")(*args)


def build_entry(fn: Callable, args: tuple) -> _Entry:
    """Traces, lowers and builds the program for inputs laid out like `args`."""
    _runtime.STATS.traces += 1
    try:
        gm = trace(fn, args)
    except Exception as error:  # whatever the function does, eager still works
        return _Entry(None, reasons={"trace": f"tracing failed: {type(error).__name__}: {error}"})
    program = lower(gm, args)
    entry = _Entry(None, output_spec=program.output_spec, aten_ops=program.aten_ops,
                   reasons=dict(program.unsupported), lowered=program)
    entry.single = program.output_spec is not None and program.output_spec.is_leaf()
    if entry.reasons:
        _runtime.log.debug("running eagerly: %s", entry.reasons)
        return entry
    if program.device.type != "cuda":
        entry.reasons["device"] = f"the inputs are on {program.device}, not on a CUDA device"
        return entry
    try:
        rt = _runtime.runtime(program.device.index or 0)
        offsets, workspace_bytes = program.workspace()
        entry.program = _runtime._C.Program(
            rt, program.to_json(),
            [(b.dtype, list(b.sizes), list(b.strides)) for b in program.buffers_of(INPUT)],
            [b.tensor for b in program.buffers_of(CONSTANT)],
            offsets, workspace_bytes,
            [(b.dtype, list(b.sizes), list(b.strides)) for b in program.buffers_of(OUTPUT)],
            [(r.kind, r.index, r.same, list(r.sizes), list(r.strides), r.storage_offset)
             for r in program.results])
    except RuntimeError as error:
        entry.reasons["runtime"] = str(error)
        _runtime.log.debug("running eagerly: %s", error)
        return entry
    entry.num_tasks = entry.program.num_tasks
    _runtime.log.debug("compiled %d tasks\n%s", entry.num_tasks, program.describe())
    return entry


class CompiledFunction:
    """What gpuos.compile returns; call it like the function."""

    def __init__(self, fn: Callable, cache_size: int = DEFAULT_CACHE_SIZE):
        if cache_size < 1:
            raise ValueError("cache_size must be at least 1")
        self.fn = fn
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, _Entry] = OrderedDict()
        self._last: Optional[_Entry] = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        last = self._last
        if last is not None and last.program is not None and not kwargs:
            try:
                result = last.program.run(args)
            except TypeError:  # an argument that is not a tensor
                result = None
            if type(result) is list:
                return self._finish(last, result)
            if result == _runtime._C.NEEDS_AUTOGRAD:
                return self._eager(last, args, kwargs, {"autograd": "inputs require grad"})
            _runtime.STATS.guard_misses += 1
        return self._slow_call(args, kwargs)

    def _finish(self, entry: _Entry, result: list) -> Any:
        stats = _runtime.STATS
        stats.compiled_calls += 1
        stats.tasks += entry.num_tasks
        return result[0] if entry.single else pytree.tree_unflatten(result, entry.output_spec)

    def _eager(self, entry: Optional[_Entry], args: tuple, kwargs: dict,
               reasons: Optional[dict] = None) -> Any:
        _runtime.STATS.note_fallback(entry.aten_ops if entry else {"<untraced>": 1},
                                     reasons if reasons is not None else entry.reasons)
        return self.fn(*args, **kwargs)

    def _slow_call(self, args: tuple, kwargs: dict) -> Any:
        if kwargs or not all(isinstance(a, torch.Tensor) for a in args):
            return self._eager(None, args, kwargs,
                               {"signature": "keyword or non-tensor arguments are not compiled"})
        key = tuple((a.dtype, a.device, tuple(a.shape), a.stride()) for a in args)
        entry = self._cache.get(key)
        if entry is None:
            entry = build_entry(self.fn, args)
            self._cache[key] = entry
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
                _runtime.STATS.cache_evictions += 1
        else:
            self._cache.move_to_end(key)
        self._last = entry
        if entry.program is None:
            return self._eager(entry, args, kwargs)
        result = entry.program.run(args)
        if type(result) is list:
            return self._finish(entry, result)
        if result == _runtime._C.NEEDS_AUTOGRAD:
            return self._eager(entry, args, kwargs, {"autograd": "inputs require grad"})
        return self._eager(entry, args, kwargs, {"guards": "the built program rejected the inputs"})

    # Introspection (tests, debugging).
    def cached_layouts(self) -> int:
        return len(self._cache)

    def last_program(self) -> Optional[Program]:
        return self._last.lowered if self._last else None


def backend(gm: torch.fx.GraphModule, example_inputs: list, **_options: Any) -> Callable:
    """The torch.compile backend: torch.compile(model, backend="gpuos")."""
    return CompiledFunction(gm)
