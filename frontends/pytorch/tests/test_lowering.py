"""Lowering of whole graphs: structure of the program, views without copies,
dependencies, buffers, the JSON description and its C++ check."""

import json

import pytest
import torch

import gpuos
from gpuos import _runtime
from gpuos._packs import ITEM_SIZES
from gpuos._program import CONSTANT, INPUT, INTERMEDIATE, OUTPUT
from gpuos._reference import run_reference


def chain(x):
    """chain100: 100 dependent elementwise ops."""
    for i in range(100):
        x = x * 0.999 if i % 2 else x + 0.001
    return x


def test_chain100_is_one_dependent_chain():
    x = torch.randn(64, 64)
    program = gpuos.lower(chain, x)
    assert program.supported
    assert len(program.tasks) == 100
    for i, task in enumerate(program.tasks[1:], start=1):
        assert task.deps == [i - 1], (i, task)
    assert len(program.buffers_of(INPUT)) == 1
    assert len(program.buffers_of(OUTPUT)) == 1
    # Scalars become dense constants (one per value), so every task is dense.
    constants = program.buffers_of(CONSTANT)
    assert len(constants) == 2 and all(b.sizes == (64, 64) for b in constants)
    for task in program.tasks:
        assert all(v.strides == (64, 1) for v in task.tensors), task
    torch.testing.assert_close(run_reference(program, [x])[0], chain(x))


def test_scalars_up_to_the_limit_are_dense_and_beyond_it_broadcast():
    limit = gpuos._lowering.DENSE_SCALAR_LIMIT
    program = gpuos.lower(lambda a: a * 2, torch.randn(limit // 256, 256))
    constant = program.buffers_of(CONSTANT)[0]
    assert constant.sizes == (limit // 256, 256)
    assert program.tasks[0].tensors[1].strides == (256, 1)
    program = gpuos.lower(lambda a: a * 2, torch.randn(limit // 256 + 1, 256))
    constant = program.buffers_of(CONSTANT)[0]
    assert constant.sizes == () and program.tasks[0].tensors[1].strides == (0, 0)


def test_views_make_no_tasks():
    x = torch.randn(4, 6)
    program = gpuos.lower(lambda a: a.t()[1:5:2].unsqueeze(0).expand(3, 2, 4) * 2, x)
    assert [t.op for t in program.tasks] == ["mul"]
    view = program.tasks[0].tensors[0]
    assert view.buffer == 0 and view.offset == 1 and view.sizes == (3, 2, 4)
    assert view.strides == (0, 2, 6)


def test_in_place_updates_of_an_input_write_the_input():
    x = torch.randn(3, 4)
    program = gpuos.lower(lambda a: a.add_(1.0), x.clone())
    add = program.tasks[-1]
    assert add.tensors[-1].buffer == 0  # writes input buffer 0
    assert program.results[0].kind == 0 and program.results[0].same
    y = x.clone()
    run_reference(program, [y])
    torch.testing.assert_close(y, x + 1)


def test_linear_and_layer_norm_use_parameters_by_reference():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU())
    x = torch.randn(2, 8)
    program = gpuos.lower(model, x)
    assert program.supported, program.unsupported
    constants = [b.tensor for b in program.buffers_of(CONSTANT)]
    assert any(c is model[0].weight for c in constants)
    assert [t.op for t in program.tasks] == ["addmm", "layer_norm", "gelu"]
    with torch.no_grad():
        torch.testing.assert_close(run_reference(program, [x])[0], model(x))


def test_attention_block():
    def attention(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1) @ v

    q, k, v = (torch.randn(8, 32, 64) for _ in range(3))
    program = gpuos.lower(attention, q, k, v)
    assert program.supported, program.unsupported
    assert [t.op for t in program.tasks] == ["bmm", "div", "softmax", "bmm"]
    torch.testing.assert_close(run_reference(program, [q, k, v])[0], attention(q, k, v),
                               rtol=1e-4, atol=1e-5)


def test_outputs_that_are_views_share_one_buffer():
    program = gpuos.lower(lambda a: ((a + 1), (a + 1).t()), torch.randn(3, 4))
    assert len(program.buffers_of(OUTPUT)) == 2
    program = gpuos.lower(lambda a: (lambda y: (y, y.t(), y[1]))(a * 2), torch.randn(3, 4))
    assert len(program.buffers_of(OUTPUT)) == 1
    assert [r.same for r in program.results] == [True, False, False]
    assert program.results[2].storage_offset == 4


def test_non_contiguous_inputs_are_read_in_place():
    x = torch.randn(6, 8)[::2, 1::3]
    program = gpuos.lower(lambda a: a.exp(), x)
    assert program.buffers[0].strides == x.stride()
    assert program.tasks[0].tensors[0].strides == x.stride()
    torch.testing.assert_close(run_reference(program, [x])[0], x.exp())


def test_workspace_is_aligned_and_covers_every_intermediate():
    program = gpuos.lower(lambda a: (a * 2).relu().sum(0), torch.randn(5, 7))
    offsets, total = program.workspace()
    intermediates = program.buffers_of(INTERMEDIATE)
    assert len(offsets) == len(intermediates) == 2
    assert all(o % 256 == 0 for o in offsets)
    assert total >= offsets[-1] + intermediates[-1].span_bytes


def test_intermediates_share_one_workspace_buffer_at_their_offsets():
    program = gpuos.lower(lambda a: (a * 2).relu().sum(0), torch.randn(5, 7))
    offsets, _ = program.workspace()
    intermediates = [i for i, b in enumerate(program.buffers) if b.kind == INTERMEDIATE]
    assert len(intermediates) == 2 and offsets[1] > 0
    doc = json.loads(program.to_json())
    assert doc["num_buffers"] == len(program.buffers) - 1  # the two intermediates are one
    numbers = program.buffer_numbers()
    assert numbers[intermediates[0]] == numbers[intermediates[1]]
    views = [(v, j) for task, t in zip(program.tasks, doc["tasks"])
             for v, j in zip(task.tensors, t["tensors"])]
    for view, entry in views:
        shift = 0
        if view.buffer in intermediates:
            shift = offsets[intermediates.index(view.buffer)] // ITEM_SIZES[view.dtype]
        assert entry["buffer"] == numbers[view.buffer]
        assert entry["offset"] == view.offset + shift
    assert any(entry["offset"] > 0 for _, entry in views)  # the second intermediate moved
    assert doc["internal_buffers"] == [numbers[intermediates[0]]]  # the workspace, once
    if _runtime._C is not None:
        _runtime._C.check_program(program.to_json())


def test_program_json_is_what_the_bridge_reads():
    program = gpuos.lower(lambda a, b: torch.where(a > 0, a, b), torch.randn(2, 3), torch.randn(3))
    doc = json.loads(program.to_json())
    assert doc["version"] == 1 and doc["num_buffers"] == len(program.buffers)
    ops = [t["op"] for t in doc["tasks"]]
    assert ops == ["gt", "where"]
    assert doc["tasks"][1]["tensors"][0]["dtype"] == "bool"
    numbers = sorted(v["buffer"] for t in doc["tasks"] for v in t["tensors"])
    assert numbers[0] == 0 and numbers[-1] == doc["num_buffers"] - 1


def test_unsupported_dtype_is_named():
    program = gpuos.lower(lambda a: a * a, torch.ones(3, dtype=torch.int16))
    assert not program.supported
    assert "inputs" in program.unsupported or "aten.mul.Tensor" in program.unsupported


def test_bridge_checks_program_descriptions():
    from gpuos import _runtime

    if _runtime._C is None:
        pytest.skip(_runtime.EXTENSION_ERROR)
    program = gpuos.lower(lambda a: a.relu(), torch.randn(3))
    _runtime._C.check_program(program.to_json())
    doc = json.loads(program.to_json())
    doc["tasks"][0]["tensors"][0]["buffer"] = 99
    with pytest.raises(RuntimeError, match="task 0 \\(relu\\), tensor 0: buffer 99"):
        _runtime._C.check_program(json.dumps(doc))
    doc = json.loads(program.to_json())
    doc["tasks"][0]["deps"] = [0]
    with pytest.raises(RuntimeError, match="not an earlier task"):
        _runtime._C.check_program(json.dumps(doc))
    for bad in (5, [-1], [99], ["0"]):
        doc = json.loads(program.to_json())
        doc["internal_buffers"] = bad
        with pytest.raises(RuntimeError, match="internal_buffers"):
            _runtime._C.check_program(json.dumps(doc))
    with pytest.raises(RuntimeError, match="invalid_argument.*not valid JSON"):
        _runtime._C.check_program("{")
