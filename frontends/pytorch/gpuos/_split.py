"""Graph splitting: a traced graph with ops gpuos cannot run becomes a plan of
steps in graph order: maximal runs of supported ops ("segments", each its own
task program, one submission per call) and the unsupported ops, which run
eagerly in between (docs/pytorch.md, "Graph splitting").

`build_plan(gm, example_inputs)` classifies every node with
`lower(split=True)` and cuts the graph; each segment becomes a GraphModule of
its own whose placeholders are the values it reads from earlier steps and
whose outputs are the values later steps (or the graph's output) read. A
segment is lowered and built at its first execution, on the values it then
receives (their real layouts), by a `SegmentBackend`: gpuos's runtime on a
GPU, or the CPU reference interpreter in tests. Whatever cannot be built
(lowering refused it in context, a runtime error) runs eagerly, as does a
segment of fewer than MIN_SEGMENT_TASKS tasks: a submission costs more than a
couple of cheap eager ops.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import torch
import torch.fx
import torch.utils._pytree as pytree

from ._fusion import enabled as fusion_enabled, optimize
from ._lowering import lower, overload_name, plain_containers
from ._program import Program

# A segment with fewer tasks than this runs eagerly when the graph is split.
MIN_SEGMENT_TASKS = 2


class SegmentBackend:
    """Builds and runs segment programs. `build` returns an opaque runner or
    raises RuntimeError (the segment then runs eagerly, with the reason);
    `run` returns the segment's results as a list, or None when its guards
    reject the inputs (the segment then runs eagerly for this call)."""

    def build(self, program: Program) -> Any:
        raise NotImplementedError

    def run(self, runner: Any, inputs: list) -> Optional[list]:
        raise NotImplementedError


@dataclass
class Segment:
    gm: torch.fx.GraphModule
    inputs: list[torch.fx.Node]  # original-graph values, in placeholder order
    outputs: list[torch.fx.Node]  # original-graph values it produces for later steps
    aten_ops: dict[str, int]
    built: bool = False
    runner: Any = None  # from SegmentBackend.build; None: runs eagerly
    num_tasks: int = 0
    lowered: Optional[Program] = None
    eager_reason: dict[str, str] = field(default_factory=dict)


@dataclass
class EagerStep:
    node: torch.fx.Node
    reason: str


Step = Union[Segment, EagerStep]


@dataclass
class CallStats:
    """What one execution of a plan did (the caller adds it to gpuos.stats())."""

    submissions: int = 0
    tasks: int = 0
    eager_ops: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    def eager(self, ops: dict[str, int], reasons: dict[str, str]) -> None:
        for name, count in ops.items():
            self.eager_ops[name] = self.eager_ops.get(name, 0) + count
        for name, reason in reasons.items():
            self.reasons.setdefault(name, reason)


@dataclass
class Plan:
    gm: torch.fx.GraphModule
    steps: list[Step]
    placeholders: list[torch.fx.Node]
    attributes: list[torch.fx.Node]  # get_attr nodes read by eager steps
    output: Any  # the output node's argument (a pytree of nodes and constants)

    @property
    def segments(self) -> list[Segment]:
        return [s for s in self.steps if isinstance(s, Segment)]

    def run(self, args: Sequence[Any], backend: SegmentBackend) -> tuple[Any, CallStats]:
        stats = CallStats()
        env: dict[torch.fx.Node, Any] = dict(zip(self.placeholders, args))
        for node in self.attributes:
            env[node] = _attribute(self.gm, node.target)

        def value(a: Any) -> Any:
            return env[a] if isinstance(a, torch.fx.Node) else a

        for step in self.steps:
            if isinstance(step, EagerStep):
                node = step.node
                env[node] = node.target(*pytree.tree_map(value, node.args),
                                        **pytree.tree_map(value, node.kwargs))
                name = overload_name(node.target)
                if name != "getitem":
                    stats.eager({name: 1}, {name: step.reason})
                continue
            inputs = [env[n] for n in step.inputs]
            if not step.built:
                _build(step, inputs, backend)
            results = None
            if step.runner is not None:
                results = backend.run(step.runner, inputs)
                if results is None:
                    stats.eager(step.aten_ops, {"guards": "a segment's program rejected its inputs"})
                else:
                    stats.submissions += 1
                    stats.tasks += step.num_tasks
            else:
                stats.eager(step.aten_ops, step.eager_reason)
            if results is None:
                results = list(step.gm(*inputs))
            for node, result in zip(step.outputs, results):
                env[node] = result
        return pytree.tree_map(value, self.output), stats


def _attribute(gm: torch.fx.GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _build(segment: Segment, inputs: list, backend: SegmentBackend) -> None:
    segment.built = True
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        segment.eager_reason = {"segment": "a segment input is not a tensor"}
        return
    program = lower(segment.gm, inputs)
    segment.lowered = program
    if program.unsupported:
        segment.eager_reason = dict(program.unsupported)
        return
    if len(program.tasks) < MIN_SEGMENT_TASKS:
        segment.eager_reason = {
            "small segment": f"a segment of fewer than {MIN_SEGMENT_TASKS} tasks between "
                             "eager ops runs eagerly"}
        return
    if fusion_enabled():
        program = optimize(program)
    try:
        segment.runner = backend.build(program)
    except RuntimeError as error:
        segment.eager_reason = {"runtime": str(error)}
        return
    segment.num_tasks = len(program.tasks)


def build_plan(gm: torch.fx.GraphModule, classification: Program) -> Plan:
    """Cuts `gm` at the nodes `classification` (lower(gm, ..., split=True))
    found eager. REQUIRES: classification.eager_nodes is not empty."""
    eager: dict[torch.fx.Node, str] = dict(classification.eager_nodes)
    steps: list[Step] = []
    placeholders: list[torch.fx.Node] = []
    attributes: list[torch.fx.Node] = []
    output: Any = None
    run: list[torch.fx.Node] = []

    def close() -> None:
        if run:
            steps.append(_segment(gm, list(run)))
            run.clear()

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            placeholders.append(node)
        elif node.op == "get_attr":
            continue  # copied into the segments that read it; read by eager steps at run time
        elif node.op == "output":
            output = node.args[0]
            attributes += [a for a in pytree.tree_leaves(output)
                           if isinstance(a, torch.fx.Node) and a.op == "get_attr"]
        elif node.op == "call_function":
            producer = node.args[0] if node.target is operator.getitem else None
            if node in eager or (isinstance(producer, torch.fx.Node) and producer in eager):
                eager.setdefault(node, eager.get(producer, ""))
                close()
                steps.append(EagerStep(node, eager[node]))
                for a in _node_args(node):
                    if a.op == "get_attr" and a not in attributes:
                        attributes.append(a)
            else:
                run.append(node)
        else:
            raise ValueError(f"{node.op} nodes cannot be split (trace to aten with make_fx)")
    close()
    return Plan(gm, steps, placeholders, attributes, plain_containers(output))


def _node_args(node: torch.fx.Node) -> list[torch.fx.Node]:
    return [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, torch.fx.Node)]


def _segment(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node]) -> Segment:
    members = set(nodes)
    inputs: list[torch.fx.Node] = []
    constants: list[torch.fx.Node] = []
    for node in nodes:
        for a in _node_args(node):
            if a in members:
                continue
            if a.op == "get_attr":
                if a not in constants:
                    constants.append(a)
            elif a not in inputs:
                inputs.append(a)
    outputs = [n for n in nodes if any(u not in members for u in n.users)]
    graph = torch.fx.Graph()
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    for a in inputs:
        mapping[a] = graph.placeholder(a.name)
        mapping[a].meta = dict(a.meta)
    for a in constants:
        mapping[a] = graph.node_copy(a)
    aten_ops: dict[str, int] = {}
    for node in nodes:
        mapping[node] = graph.node_copy(node, lambda a: mapping[a])
        name = overload_name(node.target)
        if name != "getitem":
            aten_ops[name] = aten_ops.get(name, 0) + 1
    graph.output(tuple(mapping[n] for n in outputs))
    return Segment(torch.fx.GraphModule(gm, graph), inputs, outputs, aten_ops)


def is_split(classification: Program) -> bool:
    """True when `classification` (lower(split=True)) has eager ops and
    nothing that forces the whole graph to run eagerly (inputs, constants,
    nodes that are not aten calls)."""
    if not classification.eager_nodes:
        return False
    node_level = {overload_name(n.target) for n in classification.eager_nodes}
    return all(name in node_level for name in classification.unsupported)

