"""gpuos.compile and the torch.compile backend: trace once, lower, replay.

A call first tries the program of the previous call: its guards (device,
dtype, sizes, strides of every input) are checked in C++ by Program.run,
which then binds the inputs' pointers, submits the graph once and returns the
outputs. On a guard miss the inputs' layout is looked up in a bounded LRU
cache of programs; a new layout is traced (make_fx, aten level), lowered and
built. int/float/bool/None arguments are specialized: their values are part
of the layout (a new value traces again) and constants of the trace.

A graph with ops gpuos cannot run is split (gpuos/_split.py): maximal runs of
supported ops are replayed on gpuos (one submission each), the other ops run
eagerly in between, in graph order; each eagerly run op is counted in
gpuos.stats()["fallbacks"]. What prevents splitting (a non-tensor input that
is not a scalar, keyword arguments, inputs on several devices, a constant
gpuos cannot hold, inputs not on a CUDA device) runs the whole call eagerly.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from . import _runtime
from ._fusion import enabled as fusion_enabled, optimize
from ._lowering import lower
from ._packs import GPUOS_DTYPES
from ._program import CONSTANT, INPUT, OUTPUT, Program
from ._split import Plan, SegmentBackend, build_plan, is_split

DEFAULT_CACHE_SIZE = 8
EXECUTORS = ("gpuos", "reference")
_SCALARS = (bool, int, float, type(None))


@dataclass
class _Entry:
    program: Any  # gpuos._C.Program (mode "native"), else None
    mode: str = "eager"  # "native", "reference" (CPU interpreter), "split" or "eager"
    key: Any = None  # the layout it was built for
    tensor_positions: Optional[list[int]] = None  # None: every argument is a tensor
    num_tasks: int = 0
    output_spec: Any = None
    unflatten: Callable[[list], Any] = list  # the run's output list -> the function's result
    aten_ops: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # why it runs eagerly
    lowered: Optional[Program] = None  # the whole program, or the split classification
    plan: Optional[Plan] = None  # mode "split"
    constants: list = field(default_factory=list)  # the graph's tensors (autograd check)


def _first(outputs: list) -> Any:
    return outputs[0]


def _children(spec: Any) -> list:
    children = getattr(spec, "children", None)  # torch 2.10+; children_specs is deprecated
    return list(children()) if callable(children) else list(spec.children_specs)


def unflattener(spec: Any) -> Callable[[list], Any]:
    """The function that makes a call's result from its flat output list
    (`spec`: the program's output_spec, whose containers are the function's:
    _lowering.plain_containers): one tensor, a plain tuple or list of tensors
    (a decoder step's five outputs: tuple(), where pytree.tree_unflatten
    takes 1.5 us of Python on the CPU machine), or any other tree."""
    if spec is None:
        return list
    if spec.is_leaf():
        return _first
    if spec.type in (tuple, list) and all(c.is_leaf() for c in _children(spec)):
        return spec.type
    return lambda outputs: pytree.tree_unflatten(outputs, spec)


def layout_key(args: Sequence[Any]) -> Optional[tuple]:
    """What a program is specialized on: each tensor's dtype, device, sizes and
    strides, each scalar's type and value. None: an argument of another kind."""
    key = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((a.dtype, a.device, tuple(a.shape), a.stride()))
        elif isinstance(a, _SCALARS):
            key.append((type(a), a))
        else:
            return None
    return tuple(key)


def trace(fn: Callable, args: Sequence[Any]) -> torch.fx.GraphModule:
    """`fn` traced at aten level on real inputs (runs it once). Non-tensor
    arguments are constants of the trace: the graph's placeholders are the
    tensor arguments, in order."""
    from torch.fx.experimental.proxy_tensor import make_fx

    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def call(*tensors):  # make_fx would count fn's own default parameters as inputs
        full = list(args)
        for i, t in zip(positions, tensors):
            full[i] = t
        return fn(*full)

    with torch.no_grad():
        return make_fx(call, tracing_mode="real")(*[args[i] for i in positions])


def _native_program(program: Program) -> Any:
    """gpuos._C.Program for `program`; RuntimeError when there is none."""
    rt = _runtime.runtime(program.device.index or 0)
    offsets, workspace_bytes = program.workspace()
    native = _runtime._C.Program(
        rt, program.to_json(),
        [(b.dtype, list(b.sizes), list(b.strides)) for b in program.buffers_of(INPUT)],
        [b.tensor for b in program.buffers_of(CONSTANT)],
        workspace_bytes if offsets else None,  # to_json(): one buffer for every intermediate
        [(b.dtype, list(b.sizes), list(b.strides)) for b in program.buffers_of(OUTPUT)],
        [(r.kind, r.index, r.same, list(r.sizes), list(r.strides), r.storage_offset)
         for r in program.results])
    _runtime.STATS.note_program(native)
    if native.stitch_note:
        _runtime.log.debug("%s", native.stitch_note)
    return native


class _NativeBackend(SegmentBackend):
    """Segments on gpuos's runtime (one submission each)."""

    def build(self, program: Program) -> Any:
        if program.device.type != "cuda":
            raise RuntimeError(f"the segment's inputs are on {program.device}, not on CUDA")
        return _native_program(program)

    def run(self, runner: Any, inputs: list) -> Optional[list]:
        result = runner.run(inputs)
        return result if type(result) is list else None


def _reference_guards(program: Program, inputs: Sequence[torch.Tensor]) -> bool:
    for b in program.buffers_of(INPUT):
        t = inputs[b.index]
        if (GPUOS_DTYPES.get(t.dtype) != b.dtype or tuple(t.shape) != b.sizes
                or tuple(t.stride()) != b.strides):
            return False
    return True


class _ReferenceBackend(SegmentBackend):
    """Segments on the CPU reference interpreter (tests; any device)."""

    def build(self, program: Program) -> Any:
        return program

    def run(self, runner: Any, inputs: list) -> Optional[list]:
        from ._reference import run_reference

        if not _reference_guards(runner, inputs):
            return None
        return run_reference(runner, inputs)


def build_entry(fn: Callable, args: Sequence[Any], executor: str = "gpuos") -> _Entry:
    """Traces, lowers and builds the program (or split plan) for arguments
    laid out like `args`."""
    _runtime.STATS.traces += 1
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    tensor_positions = None if len(positions) == len(args) else positions
    tensors = [args[i] for i in positions]
    try:
        gm = trace(fn, args)
    except Exception as error:  # whatever the function does, eager still works
        return _Entry(None, key=layout_key(args), tensor_positions=tensor_positions,
                      reasons={"trace": f"tracing failed: {type(error).__name__}: {error}"})
    program = lower(gm, tensors, split=True)
    if fusion_enabled():
        program = optimize(program)
    entry = _Entry(None, key=layout_key(args), tensor_positions=tensor_positions,
                   output_spec=program.output_spec, aten_ops=program.aten_ops,
                   reasons=dict(program.unsupported), lowered=program,
                   constants=[b.tensor for b in program.buffers_of(CONSTANT)])
    entry.unflatten = unflattener(program.output_spec)
    on_cuda = program.device.type == "cuda"
    if entry.reasons:
        if is_split(program) and (on_cuda or executor == "reference"):
            entry.plan = build_plan(gm, program)
            entry.mode = "split"
            _runtime.log.debug("split into %d segments: %s", len(entry.plan.segments),
                               entry.reasons)
            return entry
        _runtime.log.debug("running eagerly: %s", entry.reasons)
        return entry
    if executor == "reference":
        entry.mode, entry.num_tasks = "reference", len(program.tasks)
        return entry
    if not on_cuda:
        entry.reasons["device"] = f"the inputs are on {program.device}, not on a CUDA device"
        return entry
    try:
        entry.program = _native_program(program)
    except RuntimeError as error:
        entry.reasons["runtime"] = str(error)
        _runtime.log.debug("running eagerly: %s", error)
        return entry
    entry.mode = "native"
    entry.num_tasks = entry.program.num_tasks
    _runtime.log.debug("compiled %d tasks\n%s", entry.num_tasks, program.describe())
    return entry


# The base of CompiledFunction: with the extension, gpuos._C.FastCallable,
# whose call runs the last program in C++ (no Python frame) and calls
# _call_slow for the rest; without it, a Python __call__ (below the class).
_CallBase: Any = _runtime._C.FastCallable if _runtime._C is not None else object
# How FastCallable shapes a run's results (csrc/fast_call.h, ResultKind), by
# the entry's unflatten; any other unflatten (nested tuples and lists, dicts:
# a pytree's) is called by FastCallable with the list of results.
_RESULT_KINDS: dict[Any, int] = {list: 0, _first: 1, tuple: 2}
_UNFLATTEN_KIND = 3


class CompiledFunction(_CallBase):
    """What gpuos.compile returns; call it like the function.

    `executor="reference"` runs the programs with the CPU reference
    interpreter instead of gpuos's runtime, on any device (tests of the
    lowering and of graph splitting without a GPU)."""

    def __init__(self, fn: Callable, cache_size: int = DEFAULT_CACHE_SIZE,
                 executor: str = "gpuos"):
        if cache_size < 1:
            raise ValueError("cache_size must be at least 1")
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {EXECUTORS}, not {executor!r}")
        self.fn = fn
        self.cache_size = cache_size
        self.executor = executor
        self._backend: SegmentBackend = (_ReferenceBackend() if executor == "reference"
                                         else _NativeBackend())
        self._cache: OrderedDict[tuple, _Entry] = OrderedDict()
        self._last: Optional[_Entry] = None

    def _call_slow(self, args: tuple, kwargs: Optional[dict], status: int) -> Any:
        """A call that FastCallable did not run: `status` 0 (no program set
        for it, or keyword arguments), or why the program set did not run
        (GUARD_MISMATCH, NEEDS_AUTOGRAD)."""
        kwargs = kwargs or {}
        last = self._last
        if last is not None and last.mode != "eager" and not kwargs:
            if last.mode == "native" and last.tensor_positions is None:
                if status == 0:  # not tried in C++ (FastCallable tries only such an entry)
                    try:
                        result = last.program.run(args)
                    except TypeError:  # an argument that is not a tensor
                        result = None
                    if type(result) is list:
                        return self._finish(last, result)
                    status = result if type(result) is int else 0
                if status == _runtime._C.NEEDS_AUTOGRAD:
                    return self._eager(last, args, kwargs, {"autograd": "inputs require grad"})
            elif layout_key(args) == last.key:
                return self._run(last, args, kwargs)
            _runtime.STATS.guard_misses += 1
        return self._slow_call(args, kwargs)

    def _use(self, entry: _Entry) -> None:
        """Makes `entry` the one the next call tries first; with the
        extension, a native program of tensor arguments runs in C++
        (FastCallable), which makes one tensor, a tuple or a list itself and
        calls the entry's unflatten for any other result structure."""
        self._last = entry
        if _CallBase is object:
            return
        kind = (_RESULT_KINDS.get(entry.unflatten, _UNFLATTEN_KIND)
                if entry.mode == "native" and entry.tensor_positions is None
                and _runtime.switch_on("GPUOS_TORCH_FAST_CALL") else None)
        self._set_fast(entry.program if kind is not None else None, kind or 0,
                       entry.unflatten if kind == _UNFLATTEN_KIND else None)

    def _finish(self, entry: _Entry, result: list) -> Any:
        stats = _runtime.STATS
        stats.compiled_calls += 1
        stats.submissions += 1
        stats.tasks += entry.num_tasks
        return entry.unflatten(result)

    def _eager(self, entry: Optional[_Entry], args: tuple, kwargs: dict,
               reasons: Optional[dict] = None) -> Any:
        _runtime.STATS.note_fallback(entry.aten_ops if entry else {"<untraced>": 1},
                                     reasons if reasons is not None else entry.reasons)
        return self.fn(*args, **kwargs)

    def _run(self, entry: _Entry, args: tuple, kwargs: dict) -> Any:
        """Runs a built entry whose layout matches `args`."""
        tensors = (args if entry.tensor_positions is None
                   else [args[i] for i in entry.tensor_positions])
        if entry.mode == "native":
            result = entry.program.run(tensors)
            if type(result) is list:
                return self._finish(entry, result)
            if result == _runtime._C.NEEDS_AUTOGRAD:
                return self._eager(entry, args, kwargs, {"autograd": "inputs require grad"})
            return self._eager(entry, args, kwargs,
                               {"guards": "the built program rejected the inputs"})
        if torch.is_grad_enabled() and any(
                t.requires_grad for t in list(tensors) + entry.constants):
            return self._eager(entry, args, kwargs, {"autograd": "inputs require grad"})
        if entry.mode == "reference":
            from ._reference import run_reference

            return self._finish(entry, run_reference(entry.lowered, tensors))
        with torch.no_grad():
            result, call = entry.plan.run(tensors, self._backend)
        _runtime.STATS.note_split(call)
        return result

    def _slow_call(self, args: tuple, kwargs: dict) -> Any:
        key = None if kwargs else layout_key(args)
        if key is None:
            return self._eager(None, args, kwargs,
                               {"signature": "keyword arguments, or arguments that are neither "
                                "tensors nor int/float/bool/None, are not compiled"})
        entry = self._cache.get(key)
        if entry is None:
            entry = build_entry(self.fn, args, self.executor)
            self._cache[key] = entry
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
                _runtime.STATS.cache_evictions += 1
        else:
            self._cache.move_to_end(key)
        self._use(entry)
        if entry.mode == "eager":
            return self._eager(entry, args, kwargs)
        return self._run(entry, args, kwargs)

    # Introspection (tests, debugging).
    def runs_in_cpp(self) -> bool:
        """Whether the next call tries its program in C++ first (FastCallable)."""
        return _CallBase is not object and self._runs_fast()

    def cached_layouts(self) -> int:
        return len(self._cache)

    def last_program(self) -> Optional[Program]:
        return self._last.lowered if self._last else None

    def last_plan(self) -> Optional[Plan]:
        return self._last.plan if self._last else None


if _CallBase is object:
    def _python_call(self: CompiledFunction, *args: Any, **kwargs: Any) -> Any:
        return self._call_slow(args, kwargs, 0)

    CompiledFunction.__call__ = _python_call  # type: ignore[method-assign]


class _BackendFunction(CompiledFunction):
    """The callable the torch.compile backend returns. Dynamo calls it with
    its graph's placeholders positionally: tensors, and plain ints for the
    SymInt placeholders of dynamic dimensions (automatic dynamic shapes after
    a recompile; docs/pytorch.md), which are specialized like any scalar. A
    boxed call (one list holding the arguments) is accepted too."""

    def __init__(self, gm: torch.fx.GraphModule, **options: Any):
        super().__init__(gm, **options)
        self._placeholders = sum(1 for n in gm.graph.nodes if n.op == "placeholder")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and type(args[0]) is list and self._placeholders != 1:
            args = tuple(args[0])
        return super().__call__(*args, **kwargs)


def backend(gm: torch.fx.GraphModule, example_inputs: list,
            options: Optional[dict] = None, **extra: Any) -> Callable:
    """The torch.compile backend: torch.compile(model, backend="gpuos").
    Options (torch.compile(..., options={...})): cache_size, executor."""
    merged = dict(options or {}, **extra)
    known = {k: v for k, v in merged.items() if k in ("cache_size", "executor")}
    return _BackendFunction(gm, **known)
