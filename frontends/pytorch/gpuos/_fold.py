"""Folding an elementwise task into the task that feeds it (docs/pytorch.md,
"Elementwise fusion"): a scalar scale into a matrix product, an activation
into layer_norm.

`fold_matmul_scales(program)` rewrites `bmm(a, b) / s`, `bmm(a, b) * s` and
`s * bmm(a, b)` (and the same with `matmul`), where s is a scalar constant and
the product is an intermediate read only by that division or multiplication,
into ONE task: `baddbmm` (`addmm`) with alpha = 1 / s (or s) and beta = 0, so
the scale is applied in the product's store and the elementwise task and its
hand-over disappear. Attention's `q @ k.transpose(-2, -1) / sqrt(d)` is the
case it was made for. With beta = 0 the bias operand is never read; it is a
stride-0 view of the scale's own constant, so no buffer is added. Dividing by
s and multiplying by 1 / s may differ in the last bit for an s that is not a
power of two (as they may under torch.compile).

`fold_norm_activations(program)` rewrites `gelu(layer_norm(x))` (and
gelu_tanh, relu), where the normalized tensor is read only by the
activation, into ONE layer_norm task with its `activation` attribute set:
the activation is applied in the store, to the value rounded to the
output's dtype as the separate task would have read it (MLP blocks:
Linear, LayerNorm, GELU).
"""

from __future__ import annotations

import math
from typing import Callable, Optional

from ._fusion import _FLOATS, _drop_unused_buffers, buffer_uses
from ._lowering import attribute_text, contiguous_strides
from ._program import CONSTANT, INTERMEDIATE, Program, Task, View

# Each pass finds its candidates with the buffer uses of the program as it
# came in (_fusion.buffer_uses, once per pass). A fold moves a write from the
# folded task to its producer while the folded task stays listed until the
# end, so later lookups see one writer too many at most: they fold less,
# never wrongly.

# The product op -> the op with alpha and beta that replaces it.
_SCALED = {"bmm": "baddbmm", "matmul": "addmm"}
# Activation op -> the `activation` value of layer_norm (normalization.cuh)
# and of fused_addmm (matmul_fused.cuh): the same numbers.
ACTIVATION_NUMBERS = {"gelu": 1, "gelu_tanh": 2, "relu": 3}

# One fold of a pass, for task i: (the task it removes, the task that now
# does its work), or None. Called with the buffer uses of the program as the
# pass got it and the folds made so far (removed -> doer).
FoldStep = Callable[[Program, int, dict, dict, dict], Optional[tuple[int, int]]]


def run_fold(program: Program, step: FoldStep) -> Program:
    """Runs `step` on every task of `program`, then drops the tasks it
    folded (the same object, changed in place, is returned). A program with
    unsupported ops is left alone."""
    if not program.supported or not program.tasks:
        return program
    writers, readers = buffer_uses(program.tasks)
    folded: dict[int, int] = {}  # removed task -> the task that does its work
    for i in range(len(program.tasks)):
        pair = step(program, i, writers, readers, folded)
        if pair is not None:
            folded[pair[0]] = pair[1]
    if folded:
        _drop_tasks(program, folded)
    return program


def fold_matmul_scales(program: Program) -> Program:
    """`program` with its foldable scales folded (the same object, changed in
    place, is returned). A program with unsupported ops is left alone."""
    return run_fold(program, _fold_scale)


def _fold_scale(program: Program, i: int, writers: dict, readers: dict,
                folded: dict) -> Optional[tuple[int, int]]:
    found = _foldable(program, i, writers, readers)
    if found is None:
        return None
    task = program.tasks[i]
    producer, alpha, scale_view, out = found
    product = program.tasks[producer]
    bias = View(scale_view.buffer, scale_view.offset, scale_view.dtype, out.sizes,
                (0,) * len(out.sizes))
    program.tasks[producer] = Task(
        _SCALED[product.op], product.dtype, product.tensors[:2] + [bias, out],
        {"alpha": attribute_text(alpha), "beta": attribute_text(0.0)}, list(product.deps),
        None, joined_source(product.source, task.source))
    return i, producer


def _foldable(program: Program, i: int, writers: dict,
              readers: dict) -> Optional[tuple[int, float, View, View]]:
    """(producer task, alpha, the scale's view, the view the product writes
    instead) when task i is a foldable scale of a product, else None. The
    scale may read the product reshaped (4-D attention scores of a 3-D bmm):
    its output is then written through the product's shape, which needs it
    row-major."""
    task = program.tasks[i]
    if task.op not in ("div", "mul") or task.fused is not None or task.out_dtype is not None:
        return None
    if task.dtype not in _FLOATS or len(task.tensors) != 3:
        return None
    first, second, out = task.tensors
    candidates = [(first, second)] if task.op == "div" else [(first, second), (second, first)]
    for product_view, scale_view in candidates:
        scale = _scalar_of(program, scale_view, task.dtype)
        if scale is None or (task.op == "div" and scale == 0):
            continue
        producer = _sole_product(program, product_view, i, writers, readers, tuple(_SCALED))
        if producer is None or product_view.sizes != out.sizes:
            continue
        if not _written_only_by(out, i, writers, readers):
            continue
        alpha = 1.0 / scale if task.op == "div" else scale
        if not math.isfinite(alpha):
            continue
        written = program.tasks[producer].tensors[-1]
        if out.sizes != written.sizes:
            if not _row_major(out):
                continue
            out = View(out.buffer, out.offset, out.dtype, written.sizes,
                       contiguous_strides(written.sizes))
        return producer, alpha, scale_view, out
    return None


def _scalar_of(program: Program, view: View, dtype: str) -> Optional[float]:
    buffer = program.buffers[view.buffer]
    if buffer.kind != CONSTANT or buffer.scalar is None or buffer.dtype != dtype:
        return None
    value = float(buffer.scalar)
    return value if math.isfinite(value) else None


def _row_major(view: View) -> bool:
    expected = contiguous_strides(view.sizes)
    return all(st == e for size, st, e in zip(view.sizes, view.strides, expected) if size != 1)


def _numel(sizes: tuple[int, ...]) -> int:
    return math.prod(sizes)


def _sole_product(program: Program, view: View, reader: int, writers: dict, readers: dict,
                  ops: tuple[str, ...]) -> Optional[int]:
    """The task of one of `ops` whose whole output `view` is (as written, or
    reshaped in the same row-major order), when that task is the buffer's
    only writer and `reader` its only reader."""
    buffer = program.buffers[view.buffer]
    if buffer.kind != INTERMEDIATE or view.offset != 0:
        return None
    same = view.sizes == buffer.sizes and view.strides == buffer.strides
    whole_buffer = View(view.buffer, 0, view.dtype, buffer.sizes, buffer.strides)
    reshaped = (_row_major(view) and _row_major(whole_buffer) and
                _numel(view.sizes) == _numel(buffer.sizes))
    if not (same or reshaped):
        return None
    written_by = writers.get(view.buffer, [])
    if len(written_by) != 1 or written_by[0] >= reader or set(readers[view.buffer]) != {reader}:
        return None
    producer = program.tasks[written_by[0]]
    if producer.op not in ops or producer.fused is not None:
        return None
    written = producer.tensors[-1]
    whole = written.offset == 0 and written.sizes == buffer.sizes and written.strides == buffer.strides
    if not whole or producer.dtype != program.tasks[reader].dtype:
        return None
    return written_by[0]


def joined_source(first: str, second: str) -> str:
    """The source note of a task that does `first` then `second`."""
    return f"{first} + {second}".strip(" +")


def plain_float_task(task: Task, ops, arity: int) -> bool:
    """Whether `task` is one of `ops`, not yet fused, of a float dtype, with
    `arity` tensors and its output in its own dtype: what every fold step
    starts from for the task it removes."""
    return (task.op in ops and task.fused is None and task.out_dtype is None
            and len(task.tensors) == arity and task.dtype in _FLOATS)


def fold_norm_activations(program: Program) -> Program:
    """`program` with activations of layer_norm results folded into the
    layer_norm tasks (the same object, changed in place, is returned)."""
    return run_fold(program, _fold_norm_activation)


def _fold_norm_activation(program: Program, i: int, writers: dict, readers: dict,
                          folded: dict) -> Optional[tuple[int, int]]:
    task = program.tasks[i]
    if not plain_float_task(task, ACTIVATION_NUMBERS, 2):
        return None
    x, out = task.tensors
    producer = _sole_product(program, x, i, writers, readers, ("layer_norm",))
    if producer is None or x.sizes != out.sizes:
        return None
    norm = program.tasks[producer]
    if norm.tensors[-1].sizes != out.sizes or int(norm.attributes.get("activation", "0")):
        return None
    if not _written_only_by(out, i, writers, readers):
        return None
    norm.tensors = norm.tensors[:-1] + [out]
    norm.attributes = {**norm.attributes, "activation": str(ACTIVATION_NUMBERS[task.op])}
    norm.source = joined_source(norm.source, task.source)
    return i, producer


def _written_only_by(out: View, writer: int, writers: dict, readers: dict) -> bool:
    """Whether `writer` is the only task that writes `out`'s buffer and none
    reads it before `writer` (so the producer may write it in its place)."""
    return (writers.get(out.buffer, []) == [writer] and
            all(r >= writer for r in readers.get(out.buffer, [])))


def _drop_tasks(program: Program, folded: dict[int, int]) -> None:
    """Drops the folded tasks; the tasks that waited for one wait for the
    producer that now does its work."""
    new_index: dict[int, int] = {}
    kept: list[Task] = []
    for i, task in enumerate(program.tasks):
        if i in folded:
            continue
        new_index[i] = len(kept)
        kept.append(task)
    for n, task in enumerate(kept):
        task.deps = sorted({new_index[folded.get(d, d)] for d in task.deps} - {n})
    program.tasks = kept
    _drop_unused_buffers(program)
