"""Folding a Linear layer's neighbours into its task (docs/pytorch.md,
"Elementwise fusion"): std.linalg's `fused_addmm` is addmm with a layer_norm
prologue, an activation and a residual add in the same task
(device/include/gpuos/device/matmul_fused.cuh). Three passes, in this order,
each over the program the previous one left:

- `fold_norm_prologues`: `addmm(c, layer_norm(x), b)` (the layer_norm with
  or without its folded activation) where the normalized tensor is read only
  by the product, as its `a`, becomes ONE fused_addmm that normalizes x's
  rows itself (norm = 1 + the activation). Only when the rows fit the
  device's buffer for them (FUSED_NORM_BYTES of T in all).
- `fold_product_activations`: `gelu(addmm(...))` (and gelu_tanh, relu),
  the product read only by the activation: the activation moves into the
  product's store.
- `fold_residual_adds`: `x + addmm(...)` (either order), the product read only
  by the add and x of exactly the output's sizes, written before the
  product starts and not between: the add moves into the product's store
  (transformer blocks: x + attention(...), x + mlp(...)).

Every stage rounds to the dtype where the separate tasks stored it, so the
results match the unfused program's up to the order of the sums.
Tensors a fused task does not use are passed as its `a` (never read).
"""

from __future__ import annotations

import math
from typing import Optional

from ._fold import (ACTIVATION_NUMBERS, _row_major, _sole_product, _written_only_by,
                    joined_source, plain_float_task, run_fold)
from ._fusion import _FLOATS
from ._lowering import contiguous_strides
from ._packs import ITEM_SIZES
from ._program import Program, Task, View

FUSED = "fused_addmm"
PRODUCTS = ("addmm", FUSED)
# matmul_fused.cuh's kFusedNormBytes: the normalized rows a task holds.
FUSED_NORM_BYTES = 8192
_DEFAULTS = {"alpha": "1.0", "beta": "1.0", "norm": "0", "eps": "1e-05", "activation": "0",
             "add_residual": "0"}


def fold_linear_neighbours(program: Program) -> Program:
    """The three passes of the module docstring, in order (the same object,
    changed in place, is returned). A program with unsupported ops is left
    alone."""
    return fold_residual_adds(fold_product_activations(fold_norm_prologues(program)))


def _as_fused(task: Task) -> Task:
    """`task` (addmm or fused_addmm) as a fused_addmm with every attribute
    set and every tensor slot filled (unused slots: its `a`)."""
    if task.op == FUSED:
        return task
    a, b, c, out = task.tensors
    attributes = {**_DEFAULTS, **task.attributes}
    return Task(FUSED, task.dtype, [a, b, c, a, a, a, out], attributes, list(task.deps),
                task.out_dtype, task.source)


def _plain_epilogue(task: Task) -> bool:
    return (task.op == "addmm" or
            (task.attributes.get("activation", "0") == "0" and
             task.attributes.get("add_residual", "0") == "0"))


def fold_norm_prologues(program: Program) -> Program:
    return run_fold(program, _fold_norm_prologue)


def fold_product_activations(program: Program) -> Program:
    return run_fold(program, _fold_product_activation)


def fold_residual_adds(program: Program) -> Program:
    return run_fold(program, _fold_residual_add)


def _fold_norm_prologue(program: Program, i: int, writers: dict, readers: dict,
                        folded: dict) -> Optional[tuple[int, int]]:
    task = program.tasks[i]
    if task.op != "addmm" or task.out_dtype is not None or task.dtype not in _FLOATS:
        return None
    a = task.tensors[0]
    norm_index = _sole_product(program, a, i, writers, readers, ("layer_norm",))
    if norm_index is None or norm_index in folded:
        return None
    norm = program.tasks[norm_index]
    x, weight, bias, normalized = norm.tensors
    if not a.sizes or normalized.sizes[-1:] != a.sizes[-1:]:
        return None  # a's rows are not the normalized rows
    source = _reshaped(x, a.sizes)
    if source is None or math.prod(a.sizes) * ITEM_SIZES[task.dtype] > FUSED_NORM_BYTES:
        return None
    if not _unchanged_between(program, x, norm_index, i, writers):
        return None
    fused = _as_fused(task)
    fused.tensors = [source, fused.tensors[1], fused.tensors[2], weight, bias, source,
                     fused.tensors[6]]
    fused.attributes = {
        **fused.attributes,
        "norm": str(1 + int(norm.attributes.get("activation", "0"))),
        "eps": norm.attributes.get("eps", _DEFAULTS["eps"]),
    }
    fused.deps = sorted((set(fused.deps) | set(norm.deps)) - {norm_index})
    fused.source = joined_source(norm.source, fused.source)
    program.tasks[i] = fused
    return norm_index, i


def _fold_product_activation(program: Program, i: int, writers: dict, readers: dict,
                             folded: dict) -> Optional[tuple[int, int]]:
    task = program.tasks[i]
    if not plain_float_task(task, ACTIVATION_NUMBERS, 2):
        return None
    x, out = task.tensors
    producer = _sole_product(program, x, i, writers, readers, PRODUCTS)
    if producer is None or producer in folded.values() or x.sizes != out.sizes:
        return None
    product = program.tasks[producer]
    if product.out_dtype is not None or not _plain_epilogue(product):
        return None
    # The product writes the activation's output, read with its own sizes.
    target = _reshaped(out, product.tensors[-1].sizes)
    if target is None or not _written_only_by(out, i, writers, readers):
        return None
    fused = _as_fused(product)
    fused.tensors = fused.tensors[:-1] + [target]
    fused.attributes = {**fused.attributes, "activation": str(ACTIVATION_NUMBERS[task.op])}
    fused.source = joined_source(fused.source, task.source)
    program.tasks[producer] = fused
    return i, producer


def _fold_residual_add(program: Program, i: int, writers: dict, readers: dict,
                       folded: dict) -> Optional[tuple[int, int]]:
    task = program.tasks[i]
    if not plain_float_task(task, ("add",), 3):
        return None
    if float(task.attributes.get("alpha", "1")) != 1.0:
        return None
    first, second, out = task.tensors
    for product_view, residual in ((first, second), (second, first)):
        producer = _sole_product(program, product_view, i, writers, readers, PRODUCTS)
        if producer is None or producer in folded.values():
            continue
        product = program.tasks[producer]
        if product.out_dtype is not None or product.attributes.get("add_residual", "0") != "0":
            continue
        if not product_view.sizes == out.sizes == residual.sizes:
            continue  # no broadcasting
        if residual.dtype != task.dtype or residual.buffer == out.buffer:
            continue
        if any(producer <= w < i for w in writers.get(residual.buffer, [])):
            continue  # written after the product starts: it would read it too early
        # The product writes the add's output and reads the residual with
        # its own sizes (the same elements in row-major order).
        written = product.tensors[-1].sizes
        target, addend = _reshaped(out, written), _reshaped(residual, written)
        if target is None or addend is None or not _written_only_by(out, i, writers, readers):
            continue
        fused = _as_fused(product)
        fused.tensors = fused.tensors[:5] + [addend, target]
        fused.attributes = {**fused.attributes, "add_residual": "1"}
        fused.deps = sorted(set(fused.deps) |
                            {w for w in writers.get(residual.buffer, []) if w < producer})
        fused.source = joined_source(fused.source, task.source)
        program.tasks[producer] = fused
        return i, producer
    return None


def _reshaped(x: View, sizes: tuple[int, ...]) -> Optional[View]:
    """x read with `sizes` (the same elements in row-major order), or None."""
    if x.sizes == sizes:
        return x
    if math.prod(x.sizes) != math.prod(sizes) or not _row_major(x):
        return None
    return View(x.buffer, x.offset, x.dtype, sizes, contiguous_strides(sizes))


def _unchanged_between(program: Program, x: View, start: int, end: int, writers: dict) -> bool:
    """Whether no task in (start, end) writes x's buffer or waits for task
    `start` (which the fold removes: a task in between could not wait for
    the later task that does its work)."""
    if any(start < w < end for w in writers.get(x.buffer, [])):
        return False
    return not any(start in program.tasks[t].deps for t in range(start + 1, end))
