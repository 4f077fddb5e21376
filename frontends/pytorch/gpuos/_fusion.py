"""Fusion of elementwise tasks (docs/pytorch.md, "Elementwise fusion").

`fuse_elementwise(program)` rewrites a lowered Program: each group of
elementwise tasks where every intermediate feeds exactly one later task of the
group (a chain, or a tree such as `gelu(a + b) * c`) becomes ONE task of a
fused operator. The task's `fused` description lists the steps (standard
operators with their attributes) and where each step's operands come from: a
tensor the fused task reads, an earlier step, or a literal (scalar operands,
which the lowering holds as constant tensors). The C++ bridge turns the
description into a new operator whose body composes the constituent
operators' own code (registry::FuseElementwise), serves it with an epoch
switch (Runtime::Update) the first time, and runs the task by that name.

What is fused: operators in FUSIBLE (elementwise, every tensor of the type
variable T, one output) on the same dtype; an intermediate joins its reader's
group when it is an intermediate buffer written whole by one task, read by
exactly one task through exactly the view it was written with, and no task in
between writes a buffer the group reads. A group reads at most
MAX_FUSED_INPUTS distinct views (the task descriptor holds 8 tensors).
Nothing else changes: other tasks, buffers and results keep their meaning;
buffers nothing reads any more (the intermediates, scalar constants) are
dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from . import _runtime
from ._packs import STANDARD_OPERATORS
from ._program import CONSTANT, INTERMEDIATE, Program, Task, View

# Elementwise operators of the standard packs whose tensors all follow T
# (tests/test_coverage.py checks this against operators/*.yaml).
FUSIBLE = frozenset({
    "gelu", "gelu_tanh", "silu", "add", "sub", "mul", "div", "neg", "abs", "relu", "sigmoid",
    "tanh", "exp", "log", "sqrt", "pow", "maximum", "minimum", "clamp", "copy", "erf", "rsqrt",
    "reciprocal", "square", "sign", "floor", "ceil", "round",
})
FUSED_OP = "fused"  # the op name of a fused task until the bridge names it
MAX_FUSED_INPUTS = 7  # + 1 output = registry::kMaxOperatorTensors
MAX_FUSED_STEPS = 512
_FLOATS = ("f32", "f64", "f16", "bf16")


def enabled() -> bool:
    """Fusion is on unless GPUOS_FUSION=0 (_runtime.switch_on: anything but 0
    or 1 is a ValueError naming the variable)."""
    return _runtime.switch_on("GPUOS_FUSION")


@dataclass
class _Group:
    root: int  # the task whose output is the group's
    members: list[int] = field(default_factory=list)  # program order
    inputs: list[View] = field(default_factory=list)  # distinct views read from outside


def literal_text(value: Any, dtype: str) -> Optional[str]:
    """`value` as the fused code's literal for a `dtype` operand, or None when
    it cannot be one (not finite)."""
    if dtype in _FLOATS:
        number = float(value)
        return repr(number) if math.isfinite(number) else None
    if dtype == "bool":
        return "1" if value else "0"
    return str(int(value))


def optimize(program: Program) -> Program:
    """The rewrites GPUOS_FUSION=0 turns off, in order: scalar scales folded
    into the products that feed them and activations into the layer_norms
    that feed them (_fold.py), a Linear layer's layer_norm, activation and
    residual add into its task (_fold_linear.py), then elementwise groups
    fused. Changes `program` in place and returns it."""
    from ._fold import fold_matmul_scales, fold_norm_activations
    from ._fold_linear import fold_linear_neighbours

    return fuse_elementwise(
        fold_linear_neighbours(fold_norm_activations(fold_matmul_scales(program))))


def fuse_elementwise(program: Program) -> Program:
    """`program` with its elementwise groups fused (the same object, changed
    in place, is returned). A program with unsupported ops is left alone."""
    if not program.supported or not program.tasks:
        return program
    tasks = program.tasks
    writers, readers = buffer_uses(tasks)
    group_of: dict[int, _Group] = {}
    for i, task in enumerate(tasks):
        if not _fusible(task):
            continue
        group = _Group(root=i, members=[i])
        sources: list[Any] = []
        for v in task.tensors[:-1]:
            producer = _sole_producer(program, v, i, writers, readers, tasks)
            if producer is not None and producer in group_of and \
                    group_of[producer].root == producer and \
                    _can_join(group_of[producer], i, tasks, writers):
                sources.append(group_of[producer])
            else:
                sources.append(v)
        merged = sorted({m for s in sources if isinstance(s, _Group) for m in s.members} | {i})
        inputs = _distinct([v for s in sources
                            for v in (s.inputs if isinstance(s, _Group) else [s])
                            if _literal_of(program, v, task.dtype) is None])
        if len(inputs) > MAX_FUSED_INPUTS or len(merged) > MAX_FUSED_STEPS:
            merged = [i]
            inputs = _distinct([v for v in task.tensors[:-1]
                                if _literal_of(program, v, task.dtype) is None])
        group.members, group.inputs = merged, inputs
        for m in merged:
            group_of[m] = group
    groups = {id(g): g for g in group_of.values() if len(g.members) > 1}
    if not groups:
        return program
    _rewrite(program, list(groups.values()), group_of)
    return program


def buffer_uses(tasks: list[Task]) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """(writers, readers): for each buffer, the indices of the tasks that write
    it and of those that read it, in program order."""
    writers: dict[int, list[int]] = {}
    readers: dict[int, list[int]] = {}
    for i, task in enumerate(tasks):
        n_in = _num_inputs(task)
        for v in task.tensors[:n_in]:
            readers.setdefault(v.buffer, []).append(i)
        for v in task.tensors[n_in:]:
            writers.setdefault(v.buffer, []).append(i)
    return writers, readers


def _num_inputs(task: Task) -> int:
    if task.fused is not None:
        return task.fused["num_inputs"]
    return STANDARD_OPERATORS[task.op].inputs


def _fusible(task: Task) -> bool:
    return (task.op in FUSIBLE and task.out_dtype is None and task.fused is None
            and all(v.dtype == task.dtype for v in task.tensors))


def _sole_producer(program: Program, view: View, reader: int, writers: dict,
                   readers: dict, tasks: list[Task]) -> Optional[int]:
    """The task whose whole output `view` is, when `reader` is its only reader."""
    buffer = program.buffers[view.buffer]
    if buffer.kind != INTERMEDIATE:
        return None
    written = writers.get(view.buffer, [])
    if len(written) != 1 or set(readers.get(view.buffer, [])) != {reader}:
        return None
    producer = tasks[written[0]]
    if producer.tensors[-1] != view or producer.dtype != tasks[reader].dtype:
        return None
    whole = view.offset == 0 and view.sizes == buffer.sizes and view.strides == buffer.strides
    return written[0] if whole and written[0] < reader else None


def _can_join(group: _Group, reader: int, tasks: list[Task], writers: dict) -> bool:
    """No task between the group's first member and `reader` writes a buffer the
    group reads (the fused task reads them at `reader`'s place)."""
    read = {v.buffer for v in group.inputs}
    for k in range(group.members[0] + 1, reader):
        if k in group.members:
            continue
        if any(v.buffer in read for v in tasks[k].tensors[_num_inputs(tasks[k]):]):
            return False
    return True


def _literal_of(program: Program, view: View, dtype: str) -> Optional[str]:
    buffer = program.buffers[view.buffer]
    if buffer.kind != CONSTANT or buffer.scalar is None or buffer.dtype != dtype:
        return None
    return literal_text(buffer.scalar, dtype)


def _distinct(views: list[View]) -> list[View]:
    seen: dict[View, None] = {}
    for v in views:
        seen.setdefault(v, None)
    return list(seen)


def _fused_task(program: Program, tasks: list[Task], group: _Group) -> Task:
    root = tasks[group.root]
    step_of = {tasks[m].tensors[-1]: s for s, m in enumerate(group.members)}
    input_of = {v: k for k, v in enumerate(group.inputs)}
    steps = []
    for s, m in enumerate(group.members):
        task = tasks[m]
        operands: list[list[Any]] = []
        for v in task.tensors[:-1]:
            literal = _literal_of(program, v, task.dtype)
            if v in step_of and step_of[v] < s:
                operands.append(["step", step_of[v]])
            elif literal is not None:
                operands.append(["literal", literal])
            else:
                operands.append(["input", input_of[v]])
        steps.append({"op": task.op, "attributes": dict(task.attributes), "operands": operands})
    members = set(group.members)
    deps = sorted({d for m in group.members for d in tasks[m].deps if d not in members})
    source = " + ".join(dict.fromkeys(tasks[m].source for m in group.members if tasks[m].source))
    return Task(FUSED_OP, root.dtype, list(group.inputs) + [root.tensors[-1]], {}, deps,
                None, source, fused={"num_inputs": len(group.inputs), "steps": steps})


def _rewrite(program: Program, groups: list[_Group], group_of: dict[int, _Group]) -> None:
    tasks = program.tasks
    new_tasks: list[Task] = []
    new_index: dict[int, int] = {}
    for i, task in enumerate(tasks):
        group = group_of.get(i)
        if group is not None and len(group.members) > 1:
            if i != group.root:
                continue
            task = _fused_task(program, tasks, group)
            for m in group.members:
                new_index[m] = len(new_tasks)
        else:
            new_index[i] = len(new_tasks)
        new_tasks.append(task)
    for n, task in enumerate(new_tasks):
        task.deps = sorted({new_index[d] for d in task.deps} - {n})
    program.tasks = new_tasks
    _drop_unused_buffers(program)


def _drop_unused_buffers(program: Program) -> None:
    """Removes intermediates and scalar constants no task or result uses, and
    renumbers views, constant indices and results."""
    used = {v.buffer for t in program.tasks for v in t.tensors}
    constants_before = [i for i, b in enumerate(program.buffers) if b.kind == CONSTANT]
    result_constants = {constants_before[r.index] for r in program.results if r.kind == 1}
    keep = [i for i, b in enumerate(program.buffers)
            if i in used or i in result_constants or b.kind not in (INTERMEDIATE, CONSTANT)]
    if len(keep) == len(program.buffers):
        return
    number = {old: new for new, old in enumerate(keep)}
    program.buffers = [program.buffers[i] for i in keep]
    for task in program.tasks:
        task.tensors = [View(number[v.buffer], v.offset, v.dtype, v.sizes, v.strides)
                        for v in task.tensors]
    was_constant = {old: k for k, old in enumerate(constants_before)}
    constant_number = {}
    for position, old in enumerate(i for i in keep if i in was_constant):
        constant_number[was_constant[old]] = position
        program.buffers[number[old]].index = position
    for r in program.results:
        if r.kind == 1:
            r.index = constant_number[r.index]
