"""addmm / baddbmm (and so every nn.Linear with a bias) lower to ONE task:
the std.linalg addmm / baddbmm operators add beta * bias in the matmul's
store. Checked on the lowered program and, through the CPU reference
interpreter, against eager."""

import math

import pytest
import torch

import gpuos
from gpuos._program import CONSTANT
from gpuos._reference import run_reference

ALPHAS = [1, 2]
BETAS = [0, 1, 0.5]


def lowered(fn, *args):
    program = gpuos.lower(fn, *args)
    assert program.supported, program.unsupported
    return program


def check_against_eager(program, fn, args, rtol=1e-5, atol=1e-5):
    with torch.no_grad():
        want = fn(*args)
    for seed in (None, 1):
        got = run_reference(program, list(args), shuffle_seed=seed)[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol)


def expected_op(fused, plain, alpha, beta):
    return plain if beta == 0 and alpha == 1 else fused


def test_linear_with_bias_is_one_addmm_task_reading_the_bias_by_reference():
    model = torch.nn.Linear(8, 16)
    x = torch.randn(3, 8)
    program = lowered(model, x)
    assert [t.op for t in program.tasks] == ["addmm"]
    task = program.tasks[0]
    assert task.attributes == {"alpha": "1.0", "beta": "1.0"}
    a, b, c, out = task.tensors
    assert a.sizes == (3, 8) and b.sizes == (8, 16) and out.sizes == (3, 16)
    assert c.sizes == (3, 16) and c.strides == (0, 1)  # the bias, broadcast over rows
    assert any(buf.tensor is model.bias for buf in program.buffers_of(CONSTANT))
    check_against_eager(program, model, [x])


def test_an_mlp_has_one_task_per_linear_layer():
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    x = torch.randn(4, 32)
    program = lowered(model, x)
    assert [t.op for t in program.tasks] == ["addmm", "relu", "addmm"]
    check_against_eager(program, model, [x])


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("bias_shape", [(5,), (1, 5), (3, 5), (3, 1)])
def test_addmm_scales_and_broadcasts_the_bias(alpha, beta, bias_shape):
    a, b, c = torch.randn(3, 4), torch.randn(4, 5), torch.randn(bias_shape)

    def fn(x, y, z):
        return torch.addmm(z, x, y, beta=beta, alpha=alpha)

    program = lowered(fn, a, b, c)
    assert [t.op for t in program.tasks] == [expected_op("addmm", "matmul", alpha, beta)]
    if program.tasks[0].op == "addmm":
        attributes = program.tasks[0].attributes
        assert float(attributes["alpha"]) == alpha and float(attributes["beta"]) == beta
    check_against_eager(program, fn, [a, b, c])


@pytest.mark.parametrize("alpha", ALPHAS)
def test_beta_zero_ignores_nan_in_the_bias(alpha):
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    c = torch.full((3, 5), math.nan)

    def fn(x, y, z):
        return torch.addmm(z, x, y, beta=0, alpha=alpha)

    program = lowered(fn, a, b, c)
    if alpha != 1:
        # The bias operand is a stride-0 zero, not c: no read of c at all.
        bias = program.tasks[0].tensors[2]
        assert bias.buffer != 2 and bias.strides == (0, 0)
    got = run_reference(program, [a, b, c])[0]
    assert not got.isnan().any()
    torch.testing.assert_close(got, fn(a, b, c))


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("bias_shape", [(2, 3, 4), (4,), (2, 1, 4), (1, 3, 1)])
def test_baddbmm_is_one_task(alpha, beta, bias_shape):
    a, b, c = torch.randn(2, 3, 6), torch.randn(2, 6, 4), torch.randn(bias_shape)

    def fn(x, y, z):
        return torch.baddbmm(z, x, y, beta=beta, alpha=alpha)

    program = lowered(fn, a, b, c)
    assert [t.op for t in program.tasks] == [expected_op("baddbmm", "bmm", alpha, beta)]
    check_against_eager(program, fn, [a, b, c])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_dtypes_compute_like_the_device(dtype):
    model = torch.nn.Linear(16, 8).to(dtype)
    x = torch.randn(2, 16, dtype=dtype)
    program = lowered(model, x)
    assert [(t.op, t.dtype) for t in program.tasks] == [
        ("addmm", {torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64"}[dtype])]
    # The reference rounds once, from the float product plus bias; eager may
    # round the product first: agreement to the dtype's precision.
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float64: 1e-12}[dtype]
    check_against_eager(program, model, [x], rtol=tolerance, atol=tolerance)
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    with torch.no_grad():
        w, bias = model.weight.to(compute), model.bias.to(compute)
        exact = (x.to(compute) @ w.t() + bias).to(dtype)
    torch.testing.assert_close(run_reference(program, [x])[0], exact, rtol=0, atol=0)
