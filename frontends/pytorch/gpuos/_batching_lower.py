"""Lowering a sequence recorded by gpuos.batching() (docs/pytorch.md,
"Transparent batching").

The C++ recorder (csrc/batching_recorder.*) calls `lower_sequence` at the
flush that ends a learned sequence, with the GIL held and the batching key
excluded (torch ops here are not intercepted). Protocol:

    steps: one tuple per recorded op, in order:
        (name "aten::mul", overload "Tensor" or "", args, is_view, results,
         returns, keep)
      args: every schema argument in order; a tensor argument is ("e", i)
        (external input i) or ("s", k, j) (result j of step k); Python
        numbers, lists, dtypes, devices... by value
      results: the step's result tensors (flat; eager's values and layouts)
      returns: per return, -1 (a tensor) or n (a list of n tensors)
      keep: per result, whether it is in use outside the recorder now
    externals: the external input tensors, in order of first use

    returns ("program", runner, bindings, tasks): `bindings[n]` = (k, j),
        the result bound to the program's output buffer n; `runner` is a
        gpuos._C.Program (run by C++ with run_into) or a callable
        runner(externals, outputs)
    or ("eager", reason, steps): the sequence runs eagerly; `steps` are the
        ops that cannot run on gpuos (they run eagerly from now on and end
        the sequences around them)

The graph is an aten-level torch.fx graph like make_fx's: external inputs
are placeholders, each op a call_function node with meta["val"] = its eager
result, and every result of an op that computes (not a view) that is in use
at the flush is a graph output, bound by pointer to the tensor handed out.
Results nobody holds any more stay in the program's workspace.
"""

from __future__ import annotations

import operator
from typing import Any, Optional

import torch
import torch.fx

from . import _runtime
from ._fusion import enabled as fusion_enabled, optimize
from ._lowering import lower
from ._packs import GPUOS_DTYPES
from ._program import OUTPUT, Program


class ReferenceRunner:
    """Runs a sequence's program with the CPU reference interpreter and
    copies its results into the tensors handed out (tests; no GPU)."""

    def __init__(self, program: Program, result_of_output: list[int]):
        self.program = program
        self.result_of_output = result_of_output  # output buffer n -> graph result

    def __call__(self, externals: list, outputs: list) -> None:
        from ._reference import run_reference

        results = run_reference(self.program, externals)
        for out, i in zip(outputs, self.result_of_output):
            out.copy_(results[i])


def _op(name: str, overload: str) -> Any:
    namespace, op_name = name.split("::")
    packet = getattr(getattr(torch.ops, namespace), op_name)
    return getattr(packet, overload or "default")


def build_graph(steps: list, externals: list) -> tuple[torch.fx.GraphModule, list, dict]:
    """The fx graph of a recorded sequence; its outputs as (k, j) pairs; and
    which step each call node came from."""
    graph = torch.fx.Graph()
    placeholders = []
    for i, tensor in enumerate(externals):
        node = graph.placeholder(f"external{i}")
        node.meta["val"] = tensor
        placeholders.append(node)
    values: dict[tuple[int, int], torch.fx.Node] = {}

    def resolve(arg: Any) -> Any:
        if isinstance(arg, tuple):
            return placeholders[arg[1]] if arg[0] == "e" else values[(arg[1], arg[2])]
        if isinstance(arg, list):
            return [resolve(a) for a in arg]
        return arg

    outputs: list[tuple[int, int]] = []
    step_of: dict[torch.fx.Node, int] = {}
    for k, (name, overload, args, is_view, results, returns, keep) in enumerate(steps):
        op = _op(name, overload)
        positional, keywords = [], {}
        for schema_arg, arg in zip(op._schema.arguments, args):
            if schema_arg.kwarg_only:
                keywords[schema_arg.name] = resolve(arg)
            else:
                positional.append(resolve(arg))
        node = graph.call_function(op, tuple(positional), keywords)
        step_of[node] = k
        if returns == [-1]:
            node.meta["val"] = results[0]
            flat = [node]
        elif all(r == -1 for r in returns) or len(returns) == 1:
            node.meta["val"] = tuple(results) if returns[0] == -1 else list(results)
            flat = []
            for j, result in enumerate(results):
                item = graph.call_function(operator.getitem, (node, j))
                item.meta["val"] = result
                step_of[item] = k
                flat.append(item)
        else:
            raise NotImplementedError(f"{name}.{overload} returns tensors and lists of tensors")
        for j, value in enumerate(flat):
            values[(k, j)] = value
            if not is_view and keep[j]:
                outputs.append((k, j))
    graph.output([values[kj] for kj in outputs])
    return torch.fx.GraphModule(torch.nn.Module(), graph), outputs, step_of


def _bindings(program: Program, outputs: list, steps: list) -> tuple[Optional[list], str, list]:
    """Output buffer n -> (k, j) when every kept result is an output buffer of
    its own laid out as eager's result; else (None, why, offending steps)."""
    buffers = program.buffers_of(OUTPUT)
    bindings: list[Optional[tuple[int, int]]] = [None] * len(buffers)
    result_of_output = [0] * len(buffers)
    for i, ((k, j), r) in enumerate(zip(outputs, program.results)):
        name = f"{steps[k][0]}.{steps[k][1] or 'default'}"
        if r.kind != 2 or not r.same or bindings[r.index] is not None:
            return None, (f"result {j} of {name} is not a buffer of its own in the program "
                          "(an alias of an input or of another result)"), [k]
        buffer, tensor = buffers[r.index], steps[k][4][j]
        if (buffer.dtype != GPUOS_DTYPES.get(tensor.dtype) or buffer.sizes != tuple(tensor.shape)
                or buffer.strides != tuple(tensor.stride()) or tensor.storage_offset() != 0):
            return None, (f"result {j} of {name} is laid out differently in the program "
                          f"({buffer.dtype} {list(buffer.sizes)} strides {list(buffer.strides)}) "
                          f"than eager's ({tensor.dtype} {list(tensor.shape)} strides "
                          f"{list(tensor.stride())} offset {tensor.storage_offset()})"), [k]
        bindings[r.index] = (k, j)
        result_of_output[r.index] = i
    if any(b is None for b in bindings):
        return None, "an output buffer of the program is not a result of the sequence", []
    return [bindings, result_of_output], "", []


def lower_sequence(steps: list, externals: list, executor: str) -> tuple:
    """The recorder's callback (module docstring)."""
    try:
        gm, outputs, step_of = build_graph(steps, externals)
    except (NotImplementedError, AttributeError, KeyError) as error:
        return _eager(f"the sequence has no graph: {error}", [], steps)
    program = lower(gm, externals, split=True)
    if program.unsupported:
        eager = sorted({step_of[n] for n in program.eager_nodes if n in step_of})
        reason = "; ".join(f"{name}: {why}" for name, why in program.unsupported.items())
        return _eager(reason, eager, steps)
    if executor == "gpuos" and program.device.type != "cuda":
        return _eager(f"the sequence reads no CUDA tensor (its program would be on "
                      f"{program.device})", [], steps)
    if fusion_enabled():
        program = optimize(program)
    found, why, offending = _bindings(program, outputs, steps)
    if found is None:
        return _eager(why, offending, steps)
    bindings, result_of_output = found
    if executor == "reference":
        runner: Any = ReferenceRunner(program, result_of_output)
    else:
        from ._compile import _native_program

        try:
            runner = _native_program(program)
        except RuntimeError as error:
            return _eager(f"building the program failed: {error}", [], steps)
    _runtime.log.debug("batching: learned a sequence of %d ops, %d tasks, %d outputs bound\n%s",
                       len(steps), len(program.tasks), len(bindings), program.describe())
    return ("program", runner, bindings, len(program.tasks))


def _eager(reason: str, offending: list, steps: list) -> tuple:
    names = [f"{steps[k][0]}.{steps[k][1] or 'default'}" for k in offending]
    _runtime.log.debug("batching: a sequence of %d ops runs eagerly: %s%s", len(steps), reason,
                       f" (from now on these run eagerly: {', '.join(names)})" if names else "")
    return ("eager", reason, offending)
