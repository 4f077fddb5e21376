"""The coverage table against the standard packs, and every entry lowered and
run by the CPU reference interpreter against eager PyTorch."""

import glob
import os

import pytest
import torch
import torch.utils._pytree as pytree

import gpuos
import op_samples
from gpuos._compile import trace
from gpuos._packs import STANDARD_OPERATORS
from gpuos._reference import run_reference

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PACKS = sorted(glob.glob(os.path.join(REPO, "operators", "*.yaml")))


def _yaml_operators():
    yaml = pytest.importorskip("yaml")
    if not PACKS:
        pytest.skip("operators/*.yaml not found (not a repository checkout)")
    ops = {}
    for path in PACKS:
        with open(path) as f:
            for op in yaml.safe_load(f)["operators"]:
                ops[op["name"]] = op
    return ops


def test_operator_table_matches_the_packs():
    packs = _yaml_operators()
    assert set(STANDARD_OPERATORS) == set(packs), "gpuos/_packs.py and operators/*.yaml differ"
    for name, spec in STANDARD_OPERATORS.items():
        op = packs[name]
        assert spec.inputs == len(op.get("inputs") or []), name
        assert spec.outputs == len(op.get("outputs") or []), name
        assert spec.dtypes == set(op["dtypes"]), name
        assert spec.attributes == tuple(a["name"] for a in op.get("attributes") or []), name


def test_fusible_operators_are_elementwise_on_t_only():
    from gpuos._fusion import FUSIBLE

    packs = _yaml_operators()
    for name in FUSIBLE:
        op = packs[name]
        assert op["kind"] == "elementwise" and not op.get("out_dtypes"), name
        tensors = (op.get("inputs") or []) + op["outputs"]
        assert all(t.get("dtype", "T") == "T" for t in tensors) and len(op["outputs"]) == 1, name


def test_every_coverage_entry_names_existing_operators():
    table = gpuos.coverage()
    assert len(table) >= 100
    for overload, operators in table.items():
        assert overload.startswith("aten."), overload
        assert hasattr(torch.ops.aten, overload.split(".")[1]), overload
        for op in operators:
            assert op in STANDARD_OPERATORS, f"{overload} -> {op}"


def test_every_coverage_entry_has_a_sample():
    assert sorted(set(gpuos.coverage()) - set(op_samples.all_samples())) == []


@pytest.mark.parametrize("overload", sorted(op_samples.all_samples()))
def test_entry_lowers_and_matches_eager(overload):
    fn, args = op_samples.sample(overload)
    gm = trace(fn, tuple(args))
    called = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    assert overload in called, f"the sample does not exercise {overload}: {sorted(called)}"
    program = gpuos.lower(gm, *args)
    assert program.unsupported == {}, program.describe()
    for task in program.tasks:
        spec = STANDARD_OPERATORS[task.op]
        assert len(task.tensors) == spec.inputs + spec.outputs, task
        assert task.dtype in spec.dtypes, task
        assert set(task.attributes) <= set(spec.attributes), task
        assert all(d < program.tasks.index(task) for d in task.deps)
        assert all(len(v.sizes) == len(v.strides) <= 8 for v in task.tensors)
    expected = pytree.tree_leaves(fn(*args))
    for seed in (None, 1, 2):  # program order, and two shuffles allowed by the deps
        got = run_reference(program, args, shuffle_seed=seed)
        assert len(got) == len(expected)
        for want, have in zip(expected, got):
            assert have.shape == want.shape and have.dtype == want.dtype, overload
            torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("name", sorted(op_samples.UNSUPPORTED))
def test_unsupported_ops_are_named(name):
    fn, recorded = op_samples.UNSUPPORTED[name]
    program = gpuos.lower(fn, torch.randn(3, 4))
    assert not program.supported
    assert recorded in program.unsupported, program.unsupported
    assert program.unsupported[recorded]  # a reason
