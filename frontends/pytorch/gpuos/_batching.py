"""gpuos.batching(): the interception step of transparent batching
(docs/pytorch.md, "Transparent batching").

Inside a block, every aten operator call of this thread goes through a C++
fallback (gpuos._C, csrc/batching.cpp) below autograd and above the CPU/CUDA
kernels. Today it counts the ops by name and runs them eagerly: results are
eager's, nothing is recorded, batched or submitted to gpuos yet.
"""

from __future__ import annotations

from typing import Any

from ._runtime import EXTENSION_ERROR, _C

# True once blocks record ops into task graphs for gpuos (not built yet:
# every op inside a block runs eagerly).
RECORDS = False


class batching:  # noqa: N801 (used like a function: `with gpuos.batching():`)
    """Context manager: intercepts this thread's aten ops while open.

    Re-entrant (blocks nest; the outermost one decides) and thread-local
    (other threads are not affected). Leaving the block, also by an
    exception, restores the previous state. Raises RuntimeError when the C++
    extension is missing or the dispatch key is taken by another library.
    """

    __slots__ = ()

    def __enter__(self) -> "batching":
        if _C is None:
            raise RuntimeError(f"gpuos.batching() is unavailable: {EXTENSION_ERROR}")
        _C._batching_enter()
        return self

    def __exit__(self, *exc_info: Any) -> bool:
        _C._batching_exit()
        return False


def batching_stats() -> dict[str, Any]:
    """What this thread's batching blocks intercepted since the last reset:
    `ops` (aten overload name -> calls, e.g. "aten::add.Tensor"),
    `ran_eagerly` (calls run by the kernels below the key: all of them
    today), `recorded` (0 until recording exists), `decomposed` (composite
    ops passed on to decompose where autograd did not, e.g. under
    inference_mode; their parts are counted in `ops`), `flushes`, and
    `depth` (blocks open now)."""
    if _C is None:
        return {"ops": {}, "ran_eagerly": 0, "recorded": 0, "decomposed": 0, "flushes": 0,
                "depth": 0}
    return _C._batching_counts()


def reset_batching_stats() -> None:
    """Clears this thread's batching counts."""
    if _C is not None:
        _C._batching_reset_counts()
