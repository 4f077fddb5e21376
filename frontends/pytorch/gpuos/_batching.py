"""gpuos.batching(): transparent batching (docs/pytorch.md, "Transparent
batching").

Inside a block, every aten operator call of this thread goes through a C++
fallback (gpuos._C, csrc/batching.cpp) below autograd and above the CPU/CUDA
kernels. Ops gpuos can run are recorded by a per-thread SequenceRecorder
(csrc/batching_recorder.*): the first time a sequence is seen its ops run
eagerly while it is noted, and at the flush that ends it the sequence is
lowered to a program (gpuos/_batching_lower.py); the next time the same ops
come they only allocate their results and the flush runs the program once.
Other ops flush the pending ones and run eagerly.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from ._runtime import EXTENSION_ERROR, _C, log

# Blocks record ops and replay learned sequences as gpuos programs
# (bench/variants.py runs the gpuos_batching variant when this is true).
RECORDS = True
# Learned sequences (programs and eager marks) each thread keeps, LRU.
DEFAULT_CACHE_SIZE = 64
EXECUTORS = ("gpuos", "reference")

_local = threading.local()
_recordable_set = False
_recordable_lock = threading.Lock()


def _recordable_names() -> list[str]:
    """gpuos.coverage()'s names as the dispatcher spells them:
    "aten.add.Tensor" -> "aten::add.Tensor", "aten.relu.default" -> "aten::relu"."""
    from ._aten import COVERAGE

    names = []
    for name in COVERAGE:
        namespace, op, overload = name.split(".")
        names.append(f"{namespace}::{op}" + ("" if overload == "default" else f".{overload}"))
    return names


def _recorder(executor: str, cache_size: int) -> Any:
    global _recordable_set
    if not _recordable_set:
        with _recordable_lock:
            if not _recordable_set:
                _C._batching_set_recordable(_recordable_names())
                _recordable_set = True
    recorders = _local.__dict__.setdefault("recorders", {})
    key = (executor, cache_size)
    if key not in recorders:
        from . import _batching_lower

        def lower(steps: list, externals: list) -> tuple:
            return _batching_lower.lower_sequence(steps, externals, executor)

        recorders[key] = _C.SequenceRecorder(lower, "cpu" if executor == "reference" else "cuda",
                                             cache_size)
    return recorders[key]


class batching:  # noqa: N801 (used like a function: `with gpuos.batching():`)
    """Context manager: records this thread's aten ops while open and runs
    each learned sequence as one gpuos submission per flush.

    `executor="reference"` records ops on CPU tensors and runs the programs
    with the CPU reference interpreter (tests); the default records ops on
    CUDA tensors for gpuos. `cache_size`: learned sequences kept per thread.
    `record=False` only intercepts (counts) the ops. Re-entrant (blocks nest;
    the outermost one's options apply) and thread-local (other threads are
    not affected). Leaving the outermost block, also by an exception, runs
    the pending ops and restores the previous state. Raises RuntimeError
    when the C++ extension is missing or the dispatch key is taken by another
    library.
    """

    __slots__ = ("_executor", "_cache_size", "_record")

    def __init__(self, executor: str = "gpuos", *, cache_size: int = DEFAULT_CACHE_SIZE,
                 record: bool = True):
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {EXECUTORS}, not {executor!r}")
        if cache_size < 1:
            raise ValueError("cache_size must be at least 1")
        self._executor, self._cache_size, self._record = executor, cache_size, record

    def __enter__(self) -> "batching":
        if _C is None:
            raise RuntimeError(f"gpuos.batching() is unavailable: {EXTENSION_ERROR}")
        recorder = None
        if self._record and _C._batching_depth() == 0:
            recorder = _recorder(self._executor, self._cache_size)
        _C._batching_enter(recorder)
        return self

    def __exit__(self, *exc_info: Any) -> bool:
        try:
            _C._batching_exit()
        finally:
            if log.isEnabledFor(10) and _C._batching_depth() == 0:
                _log_new_fallbacks()
        return False


def synchronize() -> None:
    """Runs this thread's pending batched ops now (one submission per
    learned sequence). Their results are then ordered on PyTorch's current
    stream like any CUDA op: to wait for them on the host, synchronize that
    stream. Outside batching blocks there is nothing pending."""
    if _C is not None:
        _C._batching_synchronize()


def _recorders() -> list:
    return list(_local.__dict__.get("recorders", {}).values())


_SUMMED = ("learned_ops", "replayed_ops", "view_ops", "learned_sequences", "eager_sequences",
           "submissions", "tasks", "divergences", "materialized_ops", "liveness_misses",
           "evictions", "cache_entries", "keep_warms", "reused_outputs", "flush_liveness_us", "flush_submit_us",
           "flush_release_us")


def batching_stats() -> dict[str, Any]:
    """What this thread's batching blocks did since the last reset:
    `ops` (aten overload name -> calls seen, e.g. "aten::add.Tensor"),
    `ran_eagerly` (calls run by the kernels below the key), `recorded`
    (calls taken by the recorder: learned, replayed, and views run in a
    recorded sequence), `decomposed`, `flushes` (every flush call), `depth`
    (blocks open now), and the recorder's counters: `learned_ops`,
    `replayed_ops` (recorded without running), `view_ops`,
    `learned_sequences` (programs built), `eager_sequences` (sequences cached
    as eager, e.g. one op only), `submissions`, `tasks`, `divergences`,
    `materialized_ops` (replayed ops run eagerly after all), `liveness_misses`,
    `evictions`, `cache_entries`, `keep_warms` (requests to keep the persistent
    worker running while a learned sequence replays), `reused_outputs`
    (replayed results handed out again: results of an earlier replay that
    nobody held and its program did not write), `flush_liveness_us`,
    `flush_submit_us` and `flush_release_us` (host time of the flushes that
    ran a program: the liveness check, the submission, releasing the pending
    ops' tensors), `flushes_by_reason` (flushes with pending
    ops, by cause: the eager op's name, "block exit", "synchronize"),
    `fallbacks` (op -> calls run eagerly inside blocks) and
    `fallback_reasons` (op -> first reason)."""
    if _C is None:
        result: dict[str, Any] = {"ops": {}, "ran_eagerly": 0, "recorded": 0, "decomposed": 0,
                                  "flushes": 0, "depth": 0}
    else:
        result = _C._batching_counts()
    for key in _SUMMED:
        result[key] = 0
    result.update(flushes_by_reason={}, fallbacks={}, fallback_reasons={})
    for recorder in _recorders():
        s = recorder.stats()
        for key in _SUMMED:
            result[key] += s[key]
        for key in ("flushes_by_reason", "fallbacks"):
            for name, count in s[key].items():
                result[key][name] = result[key].get(name, 0) + count
        for name, why in s["fallback_reasons"].items():
            result["fallback_reasons"].setdefault(name, why)
    return result


def reset_batching_stats() -> None:
    """Clears this thread's batching counts (not its learned sequences)."""
    if _C is not None:
        _C._batching_reset_counts()
    for recorder in _recorders():
        recorder.reset_stats()


def clear_cache() -> None:
    """Forgets this thread's learned sequences (outside blocks only)."""
    if _C is not None and _C._batching_depth() > 0:
        raise RuntimeError("gpuos: clear the batching cache outside batching blocks")
    for recorder in _recorders():
        recorder.clear()


def _log_new_fallbacks() -> None:
    logged = _local.__dict__.setdefault("logged", set())
    for name, why in batching_stats()["fallback_reasons"].items():
        if name not in logged:
            logged.add(name)
            log.debug("batching: %s runs eagerly: %s", name, why)


def _num_nodes(executor: str = "gpuos", cache_size: int = DEFAULT_CACHE_SIZE) -> Optional[int]:
    """Trie nodes of this thread's recorder for these options (tests of the
    cache bound); None when there is none."""
    recorder = _local.__dict__.get("recorders", {}).get((executor, cache_size))
    return recorder.num_nodes() if recorder is not None else None
