"""Elementwise fusion (gpuos/_fusion.py): which tasks are fused, the fused
task's description, dropped buffers, hazards, and results against eager
through the CPU reference interpreter (which runs a fused task's steps)."""

import json

import pytest
import torch

import gpuos
from gpuos._fusion import FUSED_OP, FUSIBLE, MAX_FUSED_INPUTS, fuse_elementwise
from gpuos._program import CONSTANT, INPUT, INTERMEDIATE, OUTPUT, Buffer, Program, Task, View
from gpuos._reference import run_reference


def chain(x):
    for i in range(100):
        x = x * 0.999 if i % 2 else x + 0.001
    return x


def fused(fn, *args):
    program = fuse_elementwise(gpuos.lower(fn, *args))
    expected = fn(*args)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    for seed in (None, 1, 2):
        torch.testing.assert_close(run_reference(program, list(args), shuffle_seed=seed), expected)
    return program


def test_chain100_becomes_one_task_with_literal_scalars():
    x = torch.randn(64, 64)
    program = fused(chain, x)
    assert len(program.tasks) == 1
    task = program.tasks[0]
    assert task.op == FUSED_OP and task.fused["num_inputs"] == 1
    steps = task.fused["steps"]
    assert [s["op"] for s in steps] == ["add", "mul"] * 50
    assert steps[0]["operands"] == [["input", 0], ["literal", "0.001"]]
    assert steps[1]["operands"] == [["step", 0], ["literal", "0.999"]]
    # The scalar constants and the 99 intermediates are gone.
    assert [b.kind for b in program.buffers] == [INPUT, OUTPUT]
    assert task.tensors[0].buffer == 0 and task.tensors[1].buffer == 1


def test_tree_with_broadcast_inputs_and_a_parameter():
    w = torch.randn(16)

    def tree(a, b, c):
        return torch.nn.functional.gelu(a + b) * c - w * 2

    a, b, c = torch.randn(8, 16), torch.randn(8, 16), torch.randn(16)
    program = fused(tree, a, b, c)
    # w * 2 is computed once at its own shape and read broadcast: it stays a
    # task (fusing it would need its inputs broadcast the same way).
    assert [t.op for t in program.tasks] == ["mul", FUSED_OP]
    task = program.tasks[1]
    assert [s["op"] for s in task.fused["steps"]] == ["add", "gelu", "mul", "sub"]
    assert task.fused["num_inputs"] == 4  # a, b, c broadcast, w * 2 broadcast
    assert task.tensors[2].strides == (0, 1) and task.tensors[3].strides == (0, 1)
    assert task.deps == [0]
    # w and the 2 that w * 2 reads stay; the fused steps' scalars are gone.
    constants = program.buffers_of(CONSTANT)
    assert [c.scalar for c in constants] == [None, 2] and constants[0].tensor is w
    assert [c.index for c in constants] == [0, 1]


def test_an_intermediate_read_twice_is_not_fused_away():
    def two_readers(x):
        y = x * 2
        return y + 1, y * 3

    program = fused(two_readers, torch.randn(5))
    assert len(program.tasks) == 3 and all(t.fused is None for t in program.tasks)


def test_a_value_read_twice_by_one_task_fuses():
    program = fused(lambda x: (lambda y: y * y)(x + 1), torch.randn(7))
    assert len(program.tasks) == 1
    assert program.tasks[0].fused["steps"][1]["operands"] == [["step", 0], ["step", 0]]


def test_graph_outputs_and_non_elementwise_ops_end_groups():
    def mixed(x):
        y = torch.relu(x * 2 + 1)
        s = torch.softmax(y, -1)
        return y, torch.exp(s) - 1

    program = fused(mixed, torch.randn(4, 8))
    ops = [t.op for t in program.tasks]
    assert ops == [FUSED_OP, "softmax", FUSED_OP]
    assert [s["op"] for s in program.tasks[0].fused["steps"]] == ["mul", "add", "relu"]
    assert program.tasks[1].deps == [0] and program.tasks[2].deps == [1]


def test_dtype_changes_and_comparisons_are_not_fused():
    x = torch.randn(6)
    program = fused(lambda a: (a * 2).to(torch.float64) + 1, x)
    assert [t.op for t in program.tasks] == ["mul", "cast", "add"]
    program = fused(lambda a: torch.where(a * 2 > 0, a, a + 1), x)
    assert all(t.fused is None or all(s["op"] in FUSIBLE for s in t.fused["steps"])
               for t in program.tasks)


def test_f16_chain_fuses_and_matches_eager_within_tolerance():
    x = torch.randn(32, dtype=torch.float16)
    program = fuse_elementwise(gpuos.lower(lambda a: torch.sigmoid(a * 1.5 + 0.25) * a, x))
    assert len(program.tasks) == 1 and program.tasks[0].dtype == "f16"
    expected = torch.sigmoid(x * 1.5 + 0.25) * x
    torch.testing.assert_close(run_reference(program, [x])[0], expected, rtol=2e-3, atol=2e-3)


def test_groups_stop_at_the_input_limit():
    inputs = [torch.randn(4) for _ in range(MAX_FUSED_INPUTS + 3)]

    def many(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total

    program = fused(many, *inputs)
    assert len(program.tasks) >= 2
    for task in program.tasks:
        if task.fused is not None:
            assert task.fused["num_inputs"] <= MAX_FUSED_INPUTS


def _hand_program():
    """t0: b2 = in0 * 2; t1: in0 = in0 + 1 (in place); t2: out = b2 + in1.
    t0 must not move past t1, which writes what t0 reads."""
    f32 = "f32"
    buffers = [Buffer(INPUT, f32, (4,), (1,), index=0), Buffer(INPUT, f32, (4,), (1,), index=1),
               Buffer(INTERMEDIATE, f32, (4,), (1,)), Buffer(OUTPUT, f32, (4,), (1,)),
               Buffer(CONSTANT, f32, (4,), (1,), index=0, tensor=torch.full((4,), 2.0), scalar=2.0),
               Buffer(CONSTANT, f32, (4,), (1,), index=1, tensor=torch.full((4,), 1.0), scalar=1.0)]
    v = [View(i, 0, f32, (4,), (1,)) for i in range(len(buffers))]
    tasks = [Task("mul", f32, [v[0], v[4], v[2]]), Task("add", f32, [v[0], v[5], v[0]], deps=[0]),
             Task("add", f32, [v[2], v[1], v[3]], deps=[0])]
    from gpuos._program import Result

    return Program(buffers, tasks, [Result(2, 0, True, (4,), (1,), 0)], torch.device("cpu"))


def test_a_write_between_producer_and_reader_prevents_fusion():
    x, y = torch.randn(4), torch.randn(4)
    expected = x * 2 + y
    program = fuse_elementwise(_hand_program())
    assert [t.fused is None for t in program.tasks] == [True, True, True]
    assert torch.equal(run_reference(program, [x.clone(), y])[0], expected)


def test_without_the_write_the_same_program_fuses():
    program = _hand_program()
    program.tasks[1] = Task("add", "f32", [program.tasks[1].tensors[0], program.tasks[1].tensors[1],
                                           program.tasks[2].tensors[1]], deps=[])
    program.tasks[2].deps = [0, 1]
    # Now t1 writes in1 (what t2 reads), not in0: t0 may move to t2's place.
    program = fuse_elementwise(program)
    assert [t.op for t in program.tasks] == ["add", FUSED_OP]
    assert program.tasks[1].deps == [0]


def test_the_json_carries_the_steps_and_the_bridge_checks_them():
    program = fuse_elementwise(gpuos.lower(chain, torch.randn(8)))
    doc = json.loads(program.to_json())
    assert doc["tasks"][0]["op"] == FUSED_OP
    assert doc["tasks"][0]["fused"]["steps"][0]["op"] == "add"
    from gpuos import _runtime

    if _runtime._C is None:
        pytest.skip(_runtime.EXTENSION_ERROR)
    _runtime._C.check_program(program.to_json())
    bad = json.loads(program.to_json())
    bad["tasks"][0]["fused"]["steps"][1]["operands"][0] = ["step", 1]
    with pytest.raises(RuntimeError, match="fused step 1: step 1 is not an earlier step"):
        _runtime._C.check_program(json.dumps(bad))
    bad = json.loads(program.to_json())
    bad["tasks"][0]["fused"]["num_inputs"] = 2
    with pytest.raises(RuntimeError, match="num_inputs"):
        _runtime._C.check_program(json.dumps(bad))
    bad = json.loads(program.to_json())
    bad["tasks"][0]["fused"]["steps"][0]["operands"][1] = ["constant", 0]
    with pytest.raises(RuntimeError, match="unknown operand kind 'constant'"):
        _runtime._C.check_program(json.dumps(bad))


def test_compile_fuses_and_the_switch_turns_it_off(monkeypatch):
    x = torch.randn(16, 16)
    f = gpuos.compile(chain, executor="reference")
    torch.testing.assert_close(f(x), chain(x))
    assert len(f.last_program().tasks) == 1
    monkeypatch.setenv("GPUOS_FUSION", "0")
    g = gpuos.compile(chain, executor="reference")
    torch.testing.assert_close(g(x), chain(x))
    assert len(g.last_program().tasks) == 100
