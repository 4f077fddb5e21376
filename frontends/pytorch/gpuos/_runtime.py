"""The C++ extension, the per-device runtimes and the frontend's statistics."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import Counter
from typing import Any, Optional

log = logging.getLogger("gpuos")
if os.environ.get("GPUOS_LOG") and not log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("[gpuos] %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.DEBUG)

try:
    from . import _C  # type: ignore[attr-defined]

    EXTENSION_ERROR: Optional[str] = None
except ImportError as error:  # not built (a source checkout) or a missing library
    _C = None
    EXTENSION_ERROR = (f"the gpuos C++ extension gpuos._C is not available beside "
                       f"{os.path.dirname(__file__)} ({error}); install with "
                       "'pip install --no-build-isolation ./frontends/pytorch'")

_lock = threading.Lock()
_runtimes: dict[int, Any] = {}
_failures: dict[int, str] = {}


class Stats:
    """Counters of the frontend (gpuos.stats() returns a snapshot)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.compiled_calls = 0  # calls replayed on gpuos as a whole (one submission each)
        self.split_calls = 0  # calls of split graphs (segments on gpuos, eager ops between)
        self.submissions = 0  # submissions of whole programs and of segments
        self.tasks = 0  # tasks submitted by those calls
        self.eager_calls = 0  # calls that ran eagerly instead
        self.traces = 0
        self.guard_misses = 0  # calls whose inputs differed from the last program's guards
        self.cache_evictions = 0
        self.fallbacks: Counter[str] = Counter()  # op name -> times it ran eagerly
        self.fallback_reasons: dict[str, str] = {}  # why (first reason seen)
        self.stitched_programs = 0  # programs built as one stitched task
        self.unstitched: Counter[str] = Counter()  # why a program was not stitched -> programs
        if _C is not None:  # compiled calls that ran in C++ (gpuos._C.FastCallable)
            _C.reset_fast_call_counts()

    def note_program(self, program: Any) -> None:
        """A native program was built (gpuos._C.Program)."""
        if program.stitched:
            self.stitched_programs += 1
        elif program.stitch_note:
            self.unstitched[program.stitch_note] += 1

    def note_fallback(self, aten_ops: dict[str, int], reasons: dict[str, str]) -> None:
        self.eager_calls += 1
        for name, count in aten_ops.items():
            self.fallbacks[name] += count
        for name, reason in reasons.items():
            self.fallback_reasons.setdefault(name, reason)


    def note_split(self, call: Any) -> None:
        """One call of a split graph (a gpuos._split.CallStats)."""
        self.split_calls += 1
        self.submissions += call.submissions
        self.tasks += call.tasks
        for name, count in call.eager_ops.items():
            self.fallbacks[name] += count
        for name, reason in call.reasons.items():
            self.fallback_reasons.setdefault(name, reason)


STATS = Stats()


def trace_capacity() -> int:
    """Task records the device keeps for gpuos.export_trace (GPUOS_TORCH_TRACE;
    0 = no timeline). Raises ValueError naming the variable on a bad value."""
    text = os.environ.get("GPUOS_TORCH_TRACE", "").strip()
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0 or value > (1 << 24):
        raise ValueError(f"GPUOS_TORCH_TRACE={text!r}: expected the number of task records to keep "
                         f"(0 to {1 << 24}, e.g. 65536)")
    return value


# On/off switches: "0" off, "1" or unset on (docs/pytorch.md, "Configuration
# at run time"). GPUOS_FUSION and GPUOS_TORCH_FAST_CALL are read in Python,
# the others by the extension.
SWITCHES = ("GPUOS_FUSION", "GPUOS_STITCH", "GPUOS_STITCH_ATTENTION", "GPUOS_STITCH_ATTENTION_MMA",
            "GPUOS_STITCH_FLAGS", "GPUOS_TORCH_OVERLAP", "GPUOS_TORCH_OPEN_LATER",
            "GPUOS_TORCH_FAST_CALL", "GPUOS_TORCH_GPU_FENCE", "GPUOS_TORCH_TILE_LAUNCH")


def switch_on(name: str) -> bool:
    """Whether switch `name` is on: "1" or unset (or empty); "0" is off.
    ValueError naming it for anything else (a misspelt "off" must not leave
    a switch on silently)."""
    value = os.environ.get(name, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{name} must be 0 or 1 (unset: 1); got {value!r}")
    return value != "0"


def check_switches() -> None:
    """Raises ValueError naming the first of SWITCHES set to anything but 0 or 1."""
    for name in SWITCHES:
        switch_on(name)


def runtime(device_index: int) -> Any:
    """The runtime of CUDA device `device_index`, opened on first use (the
    first open builds or loads the kernel image). Raises RuntimeError with
    the reason when there is none (no extension, no CUDA device), and
    ValueError for a switch set to anything but 0 or 1 (check_switches; the
    extension checks its own again when it reads them)."""
    check_switches()
    if _C is None:
        raise RuntimeError(EXTENSION_ERROR)
    with _lock:
        if device_index in _runtimes:
            return _runtimes[device_index]
        if device_index in _failures:
            raise RuntimeError(_failures[device_index])
        try:
            rt = _C.Runtime(device_index, os.environ.get("GPUOS_TORCH_REPOSITORY", ""),
                            os.environ.get("GPUOS_TORCH_CACHE", ""), trace_capacity())
        except RuntimeError as error:
            # Opening again would fail the same way (and cost a build).
            _failures[device_index] = str(error)
            raise
        _runtimes[device_index] = rt
        log.debug("runtime opened on cuda:%d", device_index)
        return rt


def snapshot() -> dict[str, Any]:
    s = STATS
    # Compiled calls that ran in C++ (gpuos._C.FastCallable) count there.
    fast_calls, fast_tasks = _C.fast_call_counts() if _C is not None else (0, 0)
    result: dict[str, Any] = {
        "submissions": s.submissions + fast_calls,
        "compiled_calls": s.compiled_calls + fast_calls,
        "split_calls": s.split_calls,
        "tasks": s.tasks + fast_tasks,
        "eager_calls": s.eager_calls,
        "traces": s.traces,
        "guard_misses": s.guard_misses,
        "cache_evictions": s.cache_evictions,
        "fallbacks": dict(s.fallbacks),
        "fallback_reasons": dict(s.fallback_reasons),
        "stitched_programs": s.stitched_programs,
        "unstitched": dict(s.unstitched),
        "runtimes": {},
    }
    with _lock:
        for index, rt in _runtimes.items():
            result["runtimes"][f"cuda:{index}"] = json.loads(rt.stats_json())
    return result
