"""Lowering of an aten-level torch.fx graph to a gpuos task program.

`lower(gm, example_inputs)` walks the graph once. Placeholders become input
buffers, get_attr tensors (parameters, captured constants) constant buffers,
and each call_function node is handed to its rule in `_aten.TABLE`, which
emits tasks through `Lowering` (this module). Views (t, permute, view,
slice, expand, ...) emit nothing: they are new descriptors of the same
buffer. A node without a rule, or whose rule cannot handle its arguments, is
recorded in `Program.unsupported` by overload name with the reason; lowering
goes on so that every unsupported op of the graph is named.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Iterable, Optional, Sequence

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.immutable_collections import immutable_dict, immutable_list

from ._packs import GPUOS_DTYPES, STANDARD_OPERATORS
from ._program import CONSTANT, INPUT, INTERMEDIATE, OUTPUT, Buffer, Program, Result, Task, View


# Scalar operands of elementwise tasks up to this many elements become dense
# constant tensors (one per value, dtype and shape); larger ones broadcast.
# A broadcast (stride-0) operand sends the task down the device's strided
# path, which computes every element's offsets: attention seq 128's scaling
# of 8 x 128 x 128 scores took 16 tiles of 72 us that way (H100, f874c51,
# bench/results/pytorch_task_profile.json), hence 2^18 (1 MiB of f32) rather
# than 2^16. A scalar-operand fast path on the device would make this moot.
DENSE_SCALAR_LIMIT = 1 << 18


class Unsupported(Exception):
    """Raised by a rule: this node cannot run on gpuos (the message says why)."""


class _NotComputed:
    """A value gpuos does not compute (layer_norm's mean and rstd)."""

    def __init__(self, why: str):
        self.why = why


def overload_name(target: Any) -> str:
    if target is operator.getitem:
        return "getitem"
    return str(target)


def dtype_name(dtype: torch.dtype) -> str:
    try:
        return GPUOS_DTYPES[dtype]
    except KeyError:
        raise Unsupported(f"dtype {dtype} has no gpuos equivalent") from None


def contiguous_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def is_dense(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Non-overlapping and dense (a permutation of a contiguous layout)."""
    dims = sorted((st, sz) for sz, st in zip(sizes, strides) if sz != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def expand(view: View, shape: Sequence[int]) -> View:
    """`view` broadcast to `shape` (NumPy rules), as stride-0 dimensions."""
    shape = tuple(shape)
    pad = len(shape) - len(view.sizes)
    if pad < 0:
        raise Unsupported(f"cannot broadcast {list(view.sizes)} to {list(shape)}")
    sizes = (1,) * pad + view.sizes
    strides = (0,) * pad + view.strides
    new_strides = []
    for size, stride, want in zip(sizes, strides, shape):
        if size == want:
            new_strides.append(stride)
        elif size == 1:
            new_strides.append(0)
        else:
            raise Unsupported(f"cannot broadcast {list(view.sizes)} to {list(shape)}")
    return View(view.buffer, view.offset, view.dtype, shape, tuple(new_strides))


def permute(view: View, order: Sequence[int]) -> View:
    return View(view.buffer, view.offset, view.dtype,
                tuple(view.sizes[d] for d in order), tuple(view.strides[d] for d in order))


def drop_dims(view: View, dims: Iterable[int]) -> View:
    """`view` without dimensions `dims` (each of size 1)."""
    dims = set(dims)
    keep = [d for d in range(len(view.sizes)) if d not in dims]
    return View(view.buffer, view.offset, view.dtype,
                tuple(view.sizes[d] for d in keep), tuple(view.strides[d] for d in keep))


def attribute_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if not math.isfinite(value):
        raise Unsupported(f"attribute value {value} is not finite")
    return repr(value)


def node_meta(node: Any) -> Any:
    if not isinstance(node, torch.fx.Node):
        raise Unsupported("expected a graph value")
    val = node.meta.get("val")
    if val is None:
        raise Unsupported(f"node {node.name} has no shape information (trace with make_fx)")
    return val


class Lowering:
    """The program being built, and the helpers rules use to add to it."""

    def __init__(self, device: torch.device):
        self.device = device
        self.buffers: list[Buffer] = []
        self.tasks: list[Task] = []
        self._writers: dict[int, set[int]] = {}
        self._readers: dict[int, set[int]] = {}
        self._constants: dict[int, View] = {}  # id(tensor) -> view
        self._scalars: dict[tuple, View] = {}
        self.source = ""  # overload being lowered (recorded on tasks)

    # ---- buffers ----
    def _add_buffer(self, buffer: Buffer) -> View:
        self.buffers.append(buffer)
        b = len(self.buffers) - 1
        self._writers[b], self._readers[b] = set(), set()
        return View(b, 0, buffer.dtype, buffer.sizes, buffer.strides)

    def input(self, index: int, tensor: torch.Tensor) -> View:
        return self._add_buffer(Buffer(INPUT, dtype_name(tensor.dtype), tuple(tensor.shape),
                                       tuple(tensor.stride()), index=index))

    def constant(self, tensor: torch.Tensor) -> View:
        if id(tensor) in self._constants:
            return self._constants[id(tensor)]
        if tensor.device != self.device:
            raise Unsupported(f"a constant tensor is on {tensor.device}, the inputs on {self.device}")
        count = len([b for b in self.buffers if b.kind == CONSTANT])
        view = self._add_buffer(Buffer(CONSTANT, dtype_name(tensor.dtype), tuple(tensor.shape),
                                       tuple(tensor.stride()), index=count, tensor=tensor))
        self._constants[id(tensor)] = view
        return view

    def scalar(self, value: Any, dtype: str, shape: Sequence[int] = ()) -> View:
        """A constant holding `value` converted to `dtype`: rank 0, or dense
        with `shape` (so that an elementwise task keeps the device's dense
        fast path, which a stride-0 operand leaves; measured on chain100)."""
        shape = tuple(shape)
        key = (type(value), value, dtype, shape)
        if key not in self._scalars:
            from ._packs import TORCH_DTYPES

            tensor = torch.full(shape, value, dtype=TORCH_DTYPES[dtype], device=self.device)
            self._scalars[key] = self.constant(tensor)
            self.buffers[self._scalars[key].buffer].scalar = value
        return self._scalars[key]

    def new_buffer(self, dtype: str, sizes: Sequence[int],
                   strides: Optional[Sequence[int]] = None) -> View:
        sizes = tuple(int(s) for s in sizes)
        if strides is None or not is_dense(sizes, strides):
            strides = contiguous_strides(sizes)
        return self._add_buffer(Buffer(INTERMEDIATE, dtype, sizes, tuple(int(s) for s in strides)))

    def buffer_like(self, meta: torch.Tensor) -> View:
        """A new intermediate laid out as eager lays out `meta` when that is
        dense (so later views computed from eager's strides are right)."""
        return self.new_buffer(dtype_name(meta.dtype), meta.shape, meta.stride())

    # ---- tasks ----
    def emit(self, op: str, dtype: str, inputs: Sequence[View], outputs: Sequence[View],
             attributes: Optional[dict[str, Any]] = None, out_dtype: Optional[str] = None) -> int:
        spec = STANDARD_OPERATORS.get(op)
        if spec is None:
            raise Unsupported(f"no operator '{op}' in the standard packs")
        if dtype not in spec.dtypes:
            raise Unsupported(f"operator '{op}' has no {dtype} instantiation "
                              f"(it has {', '.join(sorted(spec.dtypes))})")
        if len(inputs) != spec.inputs or len(outputs) != spec.outputs:
            raise Unsupported(f"operator '{op}' takes {spec.inputs} inputs and {spec.outputs} "
                              f"outputs; the rule gave {len(inputs)} and {len(outputs)}")
        text = {k: attribute_text(v) for k, v in (attributes or {}).items()}
        for name in text:
            if name not in spec.attributes:
                raise Unsupported(f"operator '{op}' has no attribute '{name}'")
        for view in list(inputs) + list(outputs):
            if len(view.sizes) > 8:
                raise Unsupported(f"rank {len(view.sizes)} is above the runtime's 8")
        task_id = len(self.tasks)
        deps: set[int] = set()
        for v in inputs:
            deps |= self._writers[v.buffer]
        for v in outputs:
            deps |= self._writers[v.buffer] | self._readers[v.buffer]
        self.tasks.append(Task(op, dtype, list(inputs) + list(outputs), text, sorted(deps),
                               out_dtype, self.source))
        for v in inputs:
            self._readers[v.buffer].add(task_id)
        for v in outputs:
            buffer = self.buffers[v.buffer]
            whole = v.offset == 0 and v.numel == math.prod(buffer.sizes)
            if whole:
                self._writers[v.buffer] = {task_id}
            else:
                self._writers[v.buffer].add(task_id)
            self._readers[v.buffer] = set()
        return task_id

    def cast(self, view: View, dtype: str) -> View:
        if view.dtype == dtype:
            return view
        out = self.new_buffer(dtype, view.sizes)
        self.emit("cast", view.dtype, [view], [out], out_dtype=dtype)
        return out

    def operand(self, value: Any, dtype: str, shape: Optional[Sequence[int]] = None) -> View:
        """`value` (a view or a Python number) as a `dtype` view broadcast to
        `shape` (when given)."""
        if isinstance(value, _NotComputed):
            raise Unsupported(value.why)
        if isinstance(value, (bool, int, float)):
            dense = shape is not None and math.prod(shape) <= DENSE_SCALAR_LIMIT
            view = self.scalar(value, dtype, shape if dense else ())
        elif isinstance(value, View):
            view = self.cast(value, dtype)
        else:
            raise Unsupported(f"operand of type {type(value).__name__} is not supported")
        return expand(view, shape) if shape is not None else view

    def fill(self, out: View, value: Any) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            self.emit("copy", out.dtype, [expand(self.scalar(value, out.dtype), out.sizes)], [out])
        else:
            self.emit("fill", out.dtype, [], [out], {"value": float(value)})


def _bind(node: torch.fx.Node, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Arguments by schema name, defaults filled in."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        raise Unsupported("not an aten overload")
    bound: dict[str, Any] = {}
    positional = list(args)
    for arg in schema.arguments:
        if positional and not arg.kwarg_only:
            bound[arg.name] = positional.pop(0)
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            raise Unsupported(f"argument '{arg.name}' is missing")
    return bound


def _value_of(node_or_const: Any, env: dict) -> Any:
    return env[node_or_const] if isinstance(node_or_const, torch.fx.Node) else node_or_const


def plain_containers(value: Any) -> Any:
    """A graph output node's argument with the traced graph's immutable_list
    and immutable_dict as the list and dict the function returned, so that
    what is rebuilt from it (a program's output_spec, a split plan's output)
    has the function's containers. Other containers (a namedtuple,
    torch.return_types) are kept as they are."""
    if type(value) in (list, tuple, immutable_list):
        items = [plain_containers(v) for v in value]
        return tuple(items) if type(value) is tuple else items
    if type(value) in (dict, immutable_dict):
        return {k: plain_containers(v) for k, v in value.items()}
    return value


def lower(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor],
          split: bool = False) -> Program:
    """Lowers `gm` (aten level, with node.meta['val'], as make_fx makes it)
    for inputs laid out like `example_inputs`.

    With `split`, an op that cannot be lowered does not poison its users:
    its node is recorded in `Program.eager_nodes` (node -> reason) and its
    value is taken as if it came from outside (fresh input buffers laid out
    like node.meta['val']), so that every op gpuos can run is found. Such a
    program is only a classification (gpuos/_split.py lowers each segment
    again); it has no results when any node is eager."""
    from ._aten import TABLE  # the rules import this module

    devices = {t.device for t in example_inputs if isinstance(t, torch.Tensor)}
    device = next(iter(devices)) if len(devices) == 1 else torch.device("cpu")
    ctx = Lowering(device)
    unsupported: dict[str, str] = {}
    aten_ops: dict[str, int] = {}
    if len(devices) > 1:
        unsupported["inputs"] = f"inputs on several devices: {sorted(map(str, devices))}"
    env: dict[torch.fx.Node, Any] = {}
    failed = object()
    eager_nodes: dict[torch.fx.Node, str] = {}

    def give_up(node: torch.fx.Node, name: str, reason: str) -> None:
        unsupported.setdefault(name, reason)
        env[node] = failed
        if split:
            eager_nodes[node] = reason
            try:
                env[node] = pytree.tree_map(
                    lambda v: ctx.input(-1, v) if isinstance(v, torch.Tensor) else v,
                    node.meta.get("val"))
            except Unsupported:
                pass

    placeholders = 0
    outputs: list[Any] = []
    output_spec = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            example = example_inputs[placeholders] if placeholders < len(example_inputs) else None
            placeholders += 1
            if not isinstance(example, torch.Tensor):
                unsupported["inputs"] = f"input {node.name} is not a tensor"
                env[node] = failed
                continue
            try:
                env[node] = ctx.input(placeholders - 1, example)
            except Unsupported as e:
                unsupported["inputs"] = f"input {node.name}: {e}"
                env[node] = failed
        elif node.op == "get_attr":
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part)
            try:
                env[node] = ctx.constant(value) if isinstance(value, torch.Tensor) else value
            except Unsupported as e:
                unsupported[f"constant {node.target}"] = str(e)
                env[node] = failed
        elif node.op == "call_function":
            name = overload_name(node.target)
            if name != "getitem":
                aten_ops[name] = aten_ops.get(name, 0) + 1
            args = pytree.tree_map(lambda a: _value_of(a, env), node.args)
            kwargs = pytree.tree_map(lambda a: _value_of(a, env), node.kwargs)
            if any(a is failed for a in pytree.tree_leaves((args, kwargs))):
                if split and name != "getitem":
                    give_up(node, name, "an argument could not be lowered")
                else:
                    env[node] = failed
                continue
            if name == "getitem":
                env[node] = args[0][args[1]]
                continue
            rule = TABLE.get(name)
            if rule is None:
                give_up(node, name, "no lowering for this aten overload")
                continue
            ctx.source = name
            try:
                env[node] = rule(ctx, node, _bind(node, args, kwargs))
            except Unsupported as e:
                give_up(node, name, str(e))
        elif node.op == "output":
            leaves, output_spec = pytree.tree_flatten(plain_containers(node.args[0]))
            outputs = [_value_of(leaf, env) for leaf in leaves]
        else:
            unsupported[node.op] = f"{node.op} nodes are not lowered (trace to aten with make_fx)"
    results: list[Result] = []
    if not unsupported:
        try:
            results = _results(ctx, outputs)
        except Unsupported as e:
            unsupported["output"] = str(e)
    program = Program(ctx.buffers, ctx.tasks, results, device, output_spec, unsupported, aten_ops)
    program.eager_nodes = eager_nodes
    return program


def _results(ctx: Lowering, outputs: list[Any]) -> list[Result]:
    results = []
    for value in outputs:
        if isinstance(value, _NotComputed):
            raise Unsupported(f"the graph returns a value gpuos does not compute: {value.why}")
        if not isinstance(value, View):
            raise Unsupported(f"the graph returns a {type(value).__name__}, not a tensor")
        buffer = ctx.buffers[value.buffer]
        if buffer.kind == INTERMEDIATE:
            buffer.kind = OUTPUT
    output_numbers = {id(b): i for i, b in enumerate(b for b in ctx.buffers if b.kind == OUTPUT)}
    for value in outputs:
        buffer = ctx.buffers[value.buffer]
        kind = {INPUT: 0, CONSTANT: 1, OUTPUT: 2}[buffer.kind]
        index = buffer.index if kind != 2 else output_numbers[id(buffer)]
        same = (value.offset == 0 and value.sizes == buffer.sizes
                and value.strides == buffer.strides and value.dtype == buffer.dtype)
        results.append(Result(kind, index, same, value.sizes, value.strides, value.offset))
    return results
