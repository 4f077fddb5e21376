"""A scalar scale of a matrix product is folded into the product's store
(gpuos/_fold.py): bmm / s becomes one baddbmm task with alpha = 1 / s and
beta = 0. Checked on the lowered program and, through the CPU reference
interpreter, against eager; and where it must not fold."""

import math

import pytest
import torch

import gpuos
from gpuos._fold import fold_matmul_scales, fold_norm_activations
from gpuos._fusion import optimize
from gpuos._reference import run_reference


def folded(fn, *args):
    program = fold_matmul_scales(gpuos.lower(fn, *args))
    assert program.supported, program.unsupported
    return program


def check_against_eager(program, fn, args):
    with torch.no_grad():
        want = fn(*args)
    for seed in (None, 1):
        got = run_reference(program, list(args), shuffle_seed=seed)
        got = got[0] if isinstance(want, torch.Tensor) else got
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def test_attention_scores_are_one_scaled_baddbmm_task():
    q, k, v = (torch.randn(1, 4, 8, 16) for _ in range(3))
    program = folded(attention, q, k, v)
    ops = [t.op for t in program.tasks]
    assert "div" not in ops
    assert ops.count("baddbmm") == 1 and ops.count("bmm") == 1
    scaled = next(t for t in program.tasks if t.op == "baddbmm")
    assert float(scaled.attributes["alpha"]) == pytest.approx(0.25)
    assert float(scaled.attributes["beta"]) == 0.0
    bias = scaled.tensors[2]
    assert all(s == 0 for s in bias.strides)  # never read: beta is 0
    check_against_eager(program, attention, [q, k, v])


@pytest.mark.parametrize("scale_first", [False, True])
def test_a_multiplied_matmul_is_one_addmm_task(scale_first):
    def fn(x, w):
        return 0.5 * (x @ w) if scale_first else (x @ w) * 0.5

    x, w = torch.randn(3, 8), torch.randn(8, 5)
    program = folded(fn, x, w)
    assert [t.op for t in program.tasks] == ["addmm"]
    assert float(program.tasks[0].attributes["alpha"]) == 0.5
    check_against_eager(program, fn, [x, w])


def test_the_fold_keeps_a_product_that_is_read_twice():
    def fn(a, b):
        product = torch.bmm(a, b)
        return product / 4.0, product + 1

    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    program = folded(fn, a, b)
    ops = [t.op for t in program.tasks]
    assert ops.count("bmm") == 1 and "baddbmm" not in ops and "div" in ops
    check_against_eager(program, fn, [a, b])


def test_the_fold_keeps_a_division_by_a_tensor_input():
    def fn(a, b, s):
        return torch.bmm(a, b) / s

    a, b, s = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.rand(()) + 1
    program = folded(fn, a, b, s)
    assert [t.op for t in program.tasks] == ["bmm", "div"]
    check_against_eager(program, fn, [a, b, s])


def test_the_fold_keeps_a_broadcasting_scale():
    def fn(a, b):
        return torch.bmm(a, b) / torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0])

    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    program = folded(fn, a, b)
    assert "baddbmm" not in [t.op for t in program.tasks]
    check_against_eager(program, fn, [a, b])


def test_optimize_folds_then_fuses_what_follows():
    def fn(q, k):
        return torch.relu(q @ k.transpose(-2, -1) / 8.0) * 2.0

    q, k = torch.randn(1, 2, 4, 16), torch.randn(1, 2, 4, 16)
    program = optimize(gpuos.lower(fn, q, k))
    ops = [t.op for t in program.tasks]
    assert "div" not in ops and "baddbmm" in ops
    check_against_eager(program, fn, [q, k])


@pytest.mark.parametrize("activation, code", [(torch.nn.GELU(), "1"),
                                              (torch.nn.GELU(approximate="tanh"), "2"),
                                              (torch.nn.ReLU(), "3")])
def test_an_activation_of_a_layer_norm_is_applied_in_its_store(activation, code):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), activation)
    model.requires_grad_(False)
    x = torch.randn(3, 16)
    program = optimize(gpuos.lower(model, x))
    assert [t.op for t in program.tasks] == ["addmm", "layer_norm"]
    assert program.tasks[1].attributes["activation"] == code
    check_against_eager(program, model, [x])


def test_a_layer_norm_read_twice_keeps_its_activation_task():
    norm = torch.nn.LayerNorm(8)
    norm.requires_grad_(False)

    def fn(x):
        y = norm(x)
        return torch.nn.functional.gelu(y) + y

    x = torch.randn(4, 8)
    program = fold_norm_activations(gpuos.lower(fn, x))
    ops = [t.op for t in program.tasks]
    assert "gelu" in ops and "activation" not in program.tasks[ops.index("layer_norm")].attributes
    check_against_eager(program, fn, [x])
