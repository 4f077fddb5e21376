"""The task program a traced graph lowers to (docs/pytorch.md, "Program format").

A program is a list of buffers (graph inputs, constants such as parameters,
intermediates, outputs), views of them (offset, sizes, strides in elements),
and tasks that run standard-pack operators on views. Nothing here needs a GPU:
the C++ extension turns a program into a task graph once and binds buffer
addresses at each call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ._packs import ITEM_SIZES

INPUT, CONSTANT, INTERMEDIATE, OUTPUT = "input", "constant", "intermediate", "output"
WORKSPACE_ALIGNMENT = 256


@dataclass
class Buffer:
    kind: str  # INPUT, CONSTANT, INTERMEDIATE or OUTPUT
    dtype: str  # gpuos dtype name
    sizes: tuple[int, ...]  # the layout the buffer is allocated with
    strides: tuple[int, ...]
    index: int = 0  # graph input number (INPUT) or position among constants
    tensor: Optional[torch.Tensor] = None  # CONSTANT: bound by pointer at each call
    scalar: Any = None  # CONSTANT filled with this one value (Lowering.scalar)

    @property
    def span_bytes(self) -> int:
        """Bytes from element 0 to one past the last element of the layout."""
        if any(s == 0 for s in self.sizes):
            return 0
        last = sum((size - 1) * stride for size, stride in zip(self.sizes, self.strides))
        return (last + 1) * ITEM_SIZES[self.dtype]


@dataclass(frozen=True)
class View:
    """A strided view of a buffer: element `offset` is the view's element 0."""

    buffer: int
    offset: int
    dtype: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def to_json(self) -> dict[str, Any]:
        return {
            "buffer": self.buffer,
            "offset": self.offset,
            "dtype": self.dtype,
            "sizes": list(self.sizes),
            "strides": list(self.strides),
        }


@dataclass
class Task:
    op: str
    dtype: str
    tensors: list[View]  # inputs, then outputs
    attributes: dict[str, str] = field(default_factory=dict)
    deps: list[int] = field(default_factory=list)
    out_dtype: Optional[str] = None
    source: str = ""  # the aten overload it came from (diagnostics)
    # A fused task (gpuos/_fusion.py): {"num_inputs": n, "steps": [{"op",
    # "attributes", "operands": [["input", k] | ["step", j] | ["literal", text]]}]}
    fused: Optional[dict[str, Any]] = None


@dataclass
class Result:
    """One output of the graph: a view of an input, a constant or an output buffer."""

    kind: int  # 0 input, 1 constant, 2 output buffer (numbered among outputs)
    index: int
    same: bool  # the source tensor itself
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    storage_offset: int  # relative to the source tensor's own offset


@dataclass
class Program:
    buffers: list[Buffer]
    tasks: list[Task]
    results: list[Result]
    device: torch.device
    output_spec: Any = None  # torch.utils._pytree spec of the outputs
    unsupported: dict[str, str] = field(default_factory=dict)  # aten op -> reason
    aten_ops: dict[str, int] = field(default_factory=dict)  # every call in the graph
    # lower(split=True): graph nodes that must run eagerly -> why.
    eager_nodes: dict[Any, str] = field(default_factory=dict)

    @property
    def supported(self) -> bool:
        return not self.unsupported

    def buffers_of(self, kind: str) -> list[Buffer]:
        return [b for b in self.buffers if b.kind == kind]

    def workspace(self) -> tuple[list[int], int]:
        """Byte offsets of the intermediates in one workspace, and its size."""
        offsets, total = [], 0
        for b in self.buffers_of(INTERMEDIATE):
            offsets.append(total)
            span = b.span_bytes
            total += (span + WORKSPACE_ALIGNMENT - 1) // WORKSPACE_ALIGNMENT * WORKSPACE_ALIGNMENT
        return offsets, total

    def to_json(self) -> str:
        """The description gpuos._C.Program reads. Buffers are renumbered:
        inputs, constants, one workspace holding every intermediate (at its
        workspace() offset, added to its views' offsets), outputs, in order
        of appearance. One workspace entry instead of one per intermediate
        keeps a stitched task's buffer table short (docs/pytorch.md,
        "Program format")."""
        number = self.buffer_numbers()
        shift = self.workspace_element_shifts()
        tasks = []
        for task in self.tasks:
            entry: dict[str, Any] = {
                "op": task.op,
                "dtype": task.dtype,
                "tensors": [
                    dict(v.to_json(), buffer=number[v.buffer],
                         offset=v.offset + shift(v.buffer, v.dtype)) for v in task.tensors
                ],
                "attributes": dict(task.attributes),
                "deps": list(task.deps),
            }
            if task.out_dtype is not None:
                entry["out_dtype"] = task.out_dtype
            if task.fused is not None:
                entry["fused"] = task.fused
            tasks.append(entry)
        # The workspace: only the program's tasks read it (stitching may
        # then keep an intermediate in its own flagged slots instead).
        internal = sorted({number[i] for i, b in enumerate(self.buffers)
                           if b.kind == INTERMEDIATE})
        return json.dumps({"version": 1, "num_buffers": max(number, default=-1) + 1,
                           "tasks": tasks, "internal_buffers": internal})

    def buffer_numbers(self) -> list[int]:
        """Each buffer's number in to_json(): inputs, constants, the
        workspace (one number for every intermediate), outputs."""
        order = [INPUT, CONSTANT, INTERMEDIATE, OUTPUT]
        ranked = sorted(range(len(self.buffers)),
                        key=lambda i: (order.index(self.buffers[i].kind), i))
        number = [0] * len(self.buffers)
        position, previous = -1, None
        for i in ranked:
            kind = self.buffers[i].kind
            if kind != INTERMEDIATE or previous != INTERMEDIATE:
                position += 1
            number[i] = position
            previous = kind
        return number

    def workspace_element_shifts(self):
        """shift(buffer, dtype): elements of `dtype` from the workspace's start
        to intermediate `buffer`'s (0 for other buffers)."""
        offsets, _ = self.workspace()
        intermediates = [i for i, b in enumerate(self.buffers) if b.kind == INTERMEDIATE]
        byte_offset = dict(zip(intermediates, offsets))

        def shift(buffer: int, dtype: str) -> int:
            o = byte_offset.get(buffer, 0)
            item = ITEM_SIZES[dtype]
            assert o % item == 0, "workspace offsets are multiples of WORKSPACE_ALIGNMENT"
            return o // item

        return shift

    def describe(self) -> str:
        """A readable listing (GPUOS_LOG, tests)."""
        lines = [f"program: {len(self.tasks)} tasks, {len(self.buffers)} buffers"]
        for i, b in enumerate(self.buffers):
            lines.append(f"  buffer {i}: {b.kind} {b.dtype} {list(b.sizes)} strides {list(b.strides)}")
        for i, t in enumerate(self.tasks):
            views = ", ".join(f"b{v.buffer}+{v.offset}{list(v.sizes)}" for v in t.tensors)
            op = t.op
            if t.fused is not None:
                op = "fused[" + " -> ".join(step["op"] for step in t.fused["steps"]) + "]"
            lines.append(f"  task {i}: {op} {t.dtype} ({views}) {t.attributes} deps {t.deps}"
                         f"  <- {t.source}")
        for name, reason in self.unsupported.items():
            lines.append(f"  unsupported: {name}: {reason}")
        return "\n".join(lines)
