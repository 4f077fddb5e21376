"""A Linear layer's layer_norm, activation and residual add are folded into
one fused_addmm task (gpuos/_fold_linear.py). Checked on the lowered program
and, through the CPU reference interpreter, against eager (in program order
and in shuffled orders the dependencies allow); and where it must not fold."""

import pytest
import torch
from torch import nn

import gpuos
from gpuos._fusion import optimize
from gpuos._reference import run_reference


def optimized(fn, *args):
    program = optimize(gpuos.lower(fn, *args))
    assert program.supported, program.unsupported
    return program


def check_against_eager(program, fn, args, tolerance=1e-5):
    with torch.no_grad():
        want = fn(*args)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    for seed in (None, 1, 2):
        got = run_reference(program, list(args), shuffle_seed=seed)
        for have, expected in zip(got, want):
            torch.testing.assert_close(have, expected, rtol=tolerance, atol=tolerance)


def fused_tasks(program):
    return [t for t in program.tasks if t.op == "fused_addmm"]


def test_the_mlp_of_the_benchmark_folds_each_layer_norm_into_the_next_linear():
    torch.manual_seed(0)
    mlp = nn.Sequential(*[m for _ in range(4) for m in
                          (nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU())]).eval()
    x = torch.randn(4, 64)
    program = optimized(mlp, x)
    # Linear, then three (layer_norm + gelu + Linear), then the last layer_norm + gelu.
    assert [t.op for t in program.tasks] == ["addmm"] + ["fused_addmm"] * 3 + ["layer_norm"]
    for task in fused_tasks(program):
        assert task.attributes["norm"] == "2"  # layer_norm, then gelu
        assert task.attributes["activation"] == "0" and task.attributes["add_residual"] == "0"
    check_against_eager(program, mlp, [x])


class Block(nn.Module):
    """A pre-norm transformer block's MLP half on [batch, tokens, hidden]."""

    def __init__(self, hidden=32, inner=64):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, inner), nn.Linear(inner, hidden)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln(x))))


def test_a_transformer_mlp_is_two_tasks():
    torch.manual_seed(1)
    block = Block().eval()
    x = torch.randn(1, 2, 32)
    program = optimized(block, x)
    fused = fused_tasks(program)
    assert len(program.tasks) == 2 and len(fused) == 2, program.describe()
    first, second = fused
    assert first.attributes["norm"] == "1" and first.attributes["activation"] == "1"
    assert second.attributes["add_residual"] == "1" and second.attributes["norm"] == "0"
    assert program.tasks.index(first) in second.deps
    check_against_eager(program, block, [x])


@pytest.mark.parametrize("residual_first", [False, True])
def test_a_residual_add_in_either_order_moves_into_the_store(residual_first):
    linear = nn.Linear(16, 16).eval()

    def fn(x, r):
        y = linear(x)
        return r + y if residual_first else y + r

    x, r = torch.randn(3, 16), torch.randn(3, 16)
    program = optimized(fn, x, r)
    assert [t.op for t in program.tasks] == ["fused_addmm"]
    check_against_eager(program, fn, [x, r])


@pytest.mark.parametrize("activation, code", [("relu", "3"), ("gelu_tanh", "2")])
def test_an_activation_of_a_product_moves_into_the_store(activation, code):
    linear = nn.Linear(8, 12).eval()

    def fn(x):
        y = linear(x)
        return torch.relu(y) if activation == "relu" else nn.functional.gelu(y, approximate="tanh")

    x = torch.randn(5, 8)
    program = optimized(fn, x)
    assert [t.op for t in program.tasks] == ["fused_addmm"]
    assert program.tasks[0].attributes["activation"] == code
    check_against_eager(program, fn, [x])


def test_half_precision_rounds_where_the_separate_tasks_would():
    torch.manual_seed(2)
    block = Block().eval().to(torch.float16)
    x = torch.randn(1, 3, 32).to(torch.float16)
    program = optimized(block, x)
    assert len(fused_tasks(program)) == 2
    unfused = gpuos.lower(block, x)
    want = run_reference(unfused, [x])[0]
    got = run_reference(program, [x])[0]
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)


def test_a_layer_norm_read_twice_stays_a_task():
    ln, linear = nn.LayerNorm(16), nn.Linear(16, 16)

    def fn(x):
        h = ln(x)
        return linear(h), h * 2

    x = torch.randn(2, 16)
    program = optimized(fn, x)
    assert "layer_norm" in [t.op for t in program.tasks]
    assert all(t.attributes.get("norm", "0") == "0" for t in fused_tasks(program))
    check_against_eager(program, fn, [x])


def test_rows_too_large_for_the_device_buffer_keep_their_layer_norm_task():
    ln, linear = nn.LayerNorm(256), nn.Linear(256, 8)  # 16 x 256 f32 = 16 KiB > 8 KiB

    def fn(x):
        return linear(ln(x))

    x = torch.randn(16, 256)
    program = optimized(fn, x)
    assert [t.op for t in program.tasks] == ["layer_norm", "addmm"]
    check_against_eager(program, fn, [x], tolerance=1e-4)


def test_a_broadcast_residual_is_read_through_its_stride_0_view():
    linear = nn.Linear(8, 8)

    def fn(x, r):
        return linear(x) + r  # r broadcasts over the rows

    x, r = torch.randn(3, 8), torch.randn(8)
    program = optimized(fn, x, r)
    assert [t.op for t in program.tasks] == ["fused_addmm"]
    residual = program.tasks[0].tensors[5]
    assert residual.sizes == (3, 8) and residual.strides == (0, 1)
    check_against_eager(program, fn, [x, r])


def test_a_residual_written_after_the_product_started_is_not_folded():
    linear = nn.Linear(8, 8)

    def fn(x, r):
        y = linear(x)
        r2 = r * 3  # written after the product in program order
        return y + r2

    x, r = torch.randn(2, 8), torch.randn(2, 8)
    program = gpuos.lower(fn, x, r)
    assert [t.op for t in program.tasks] == ["addmm", "mul", "add"]  # the premise
    program = optimize(program)
    assert all(t.attributes.get("add_residual", "0") == "0" for t in fused_tasks(program))
    assert "addmm" in [t.op for t in program.tasks]  # the product keeps its own task
    check_against_eager(program, fn, [x, r])


def test_a_product_read_twice_keeps_its_activation_task():
    linear = nn.Linear(8, 8)

    def fn(x):
        y = linear(x)
        return torch.relu(y), y + 1

    x = torch.randn(2, 8)
    program = optimized(fn, x)
    assert all(t.attributes.get("activation", "0") == "0" for t in fused_tasks(program))
    check_against_eager(program, fn, [x])
