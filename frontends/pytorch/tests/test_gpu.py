"""On a GPU: gpuos.compile and the torch.compile backend against eager
(correctness first), guards and re-tracing, pointer binding, and a rough
timing of chain100_64x64_f32. Skipped (with the reason) without a GPU."""

import json
import os

import pytest
import torch
import torch.utils._pytree as pytree

import gpuos
from gpu_timing import chain100, median_us as _median_us
import op_samples


@pytest.fixture(autouse=True)
def fresh_stats():
    gpuos.reset_stats()


def test_chain100_matches_eager_then_timing(gpu):
    x = torch.randn(64, 64, device=gpu)
    f = gpuos.compile(chain100)
    torch.testing.assert_close(f(x), chain100(x))
    s = gpuos.stats()
    # Fused into one task (GPUOS_FUSION=0: 100).
    fused = os.environ.get("GPUOS_FUSION", "1") != "0"
    assert s["compiled_calls"] == 1 and s["submissions"] == 1 and s["tasks"] == (1 if fused else 100)
    assert s["eager_calls"] == 0
    eager = _median_us(lambda: chain100(x))
    # Both until PyTorch's current stream is synchronized, which a gpuos call
    # is ordered on (not a device synchronize, which would also wait for the
    # worker to park).
    compiled = _median_us(lambda: f(x))
    result = {"workload": "chain100_64x64_f32", "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "eager_us": eager, "gpuos_compile_us": compiled,
              "speedup": eager[0] / compiled[0], "note": "median, p10, p90 of 200 calls, each "
              "until torch.cuda.current_stream().synchronize() returns"}
    print(json.dumps(result))
    out = os.environ.get("GPUOS_BENCH_OUT")
    if out:
        with open(out, "w") as f_out:
            json.dump(result, f_out, indent=2)
    assert gpuos.stats()["submissions"] == 1 + 220  # one submission per call


def test_fused_operators_are_served_once_and_match_eager(gpu):
    from gpuos import _runtime

    def tree(a, b, c):
        return torch.nn.functional.gelu(a + b) * c - 0.5

    def tree_f16(a):
        return torch.sigmoid(a * 1.5 + 0.25) * a

    a, b, c = (torch.randn(33, 65, device=gpu) for _ in range(3))
    f = gpuos.compile(tree)
    torch.testing.assert_close(f(a, b, c[0]), tree(a, b, c[0]))
    assert gpuos.stats()["tasks"] == 1
    runtime = json.loads(_runtime.runtime(0).stats_json())
    switches = runtime["epoch_switches"]
    assert switches >= 1  # the fused operator was served by an epoch switch
    # The same group in another program, on other layouts: the operator is
    # already served (no further epoch switch), strided inputs are fine.
    g = gpuos.compile(tree)
    t = torch.randn(65, 33, device=gpu).t()
    torch.testing.assert_close(g(t, b, c), tree(t, b, c))
    assert json.loads(_runtime.runtime(0).stats_json())["epoch_switches"] == switches
    h = gpuos.compile(tree_f16)
    x = torch.randn(1000, device=gpu, dtype=torch.float16)
    torch.testing.assert_close(h(x), tree_f16(x), rtol=2e-3, atol=2e-3)


def _long_producer(device):
    """A tensor whose computation takes about a millisecond on the GPU."""
    a = torch.randn(2048, 2048, device=device)
    return (a @ a)[:256, :256] / 2048.0


@pytest.mark.parametrize("side_stream", [False, True], ids=["current_stream", "side_stream"])
def test_calls_are_ordered_on_the_current_stream(gpu, side_stream):
    """Inputs still being computed on PyTorch's stream are waited for, and
    PyTorch's next ops on that stream see the results (the legacy default
    stream and a non-default one)."""
    f = gpuos.compile(chain100)
    stream = torch.cuda.Stream() if side_stream else torch.cuda.current_stream()
    with torch.cuda.stream(stream):
        for _ in range(5):
            x = _long_producer(gpu)   # queued, not finished, when f is called
            y = f(x) * 2.0            # PyTorch's op after gpuos's, same stream
            expected = chain100(x) * 2.0
            torch.testing.assert_close(y, expected)
    assert gpuos.stats()["compiled_calls"] == 5


@pytest.mark.parametrize("overload", sorted(op_samples.all_samples("cpu")))
def test_every_entry_on_gpu_matches_eager(gpu, overload):
    fn, args = op_samples.sample(overload, device="cuda")
    expected = pytree.tree_leaves(fn(*args))
    got = pytree.tree_leaves(gpuos.compile(fn)(*args))
    s = gpuos.stats()
    assert s["compiled_calls"] == 1, s["fallback_reasons"]
    for want, have in zip(expected, got):
        assert have.device == want.device and have.dtype == want.dtype and have.shape == want.shape
        torch.testing.assert_close(have, want, rtol=2e-4, atol=2e-5, equal_nan=True)


def test_guards_retrace_and_rebind_pointers(gpu):
    f = gpuos.compile(lambda x, y: torch.relu(x @ y) + 1)
    a, b = torch.randn(8, 16, device=gpu), torch.randn(16, 4, device=gpu)
    torch.testing.assert_close(f(a, b), torch.relu(a @ b) + 1)
    a2, b2 = torch.randn(8, 16, device=gpu), torch.randn(16, 4, device=gpu)
    torch.testing.assert_close(f(a2, b2), torch.relu(a2 @ b2) + 1)  # same program, new pointers
    assert gpuos.stats()["traces"] == 1
    c = torch.randn(3, 16, device=gpu)
    torch.testing.assert_close(f(c, b), torch.relu(c @ b) + 1)  # new shape: re-trace
    bt = torch.randn(4, 16, device=gpu).t()
    torch.testing.assert_close(f(a, bt), torch.relu(a @ bt) + 1)  # new strides: re-trace
    torch.testing.assert_close(f(a, b), torch.relu(a @ b) + 1)  # cached
    s = gpuos.stats()
    assert s["traces"] == 3 and s["compiled_calls"] == 5 and s["guard_misses"] >= 3


def test_calls_run_in_cpp_with_the_function_s_result_structure(gpu):
    """The replay of a call whose arguments are tensors runs in C++
    (gpuos._C.FastCallable): one tensor, a tuple, a list, nested ones and a
    dict come back as the function returns them; the stats count those
    calls; a guard miss, a non-tensor argument, keyword arguments and inputs
    that require grad leave it for Python, which handles them as before."""
    x = torch.randn(8, 16, device=gpu)
    functions = {
        "tensor": lambda t: torch.relu(t) + 1,
        "tuple": lambda t: (t + 1, t * 2),
        "list": lambda t: [t - 1, t.t()],  # a view of an output among the results
        "nested": lambda t: (t + 1, [t * 2, (t - 3,)]),
        "dict": lambda t: {"logits": t * 2, "state": (t + 1, t.sum(1))},
    }
    for name, fn in functions.items():
        f = gpuos.compile(fn)
        gpuos.reset_stats()
        for _ in range(3):
            got, want = f(x), fn(x)
            assert type(got) is type(want), name
            torch.testing.assert_close(got, want, msg=name)
        assert f.runs_in_cpp(), name
        s = gpuos.stats()
        assert s["compiled_calls"] == 3 and s["submissions"] == 3 and s["tasks"] >= 3, (name, s)
    f = gpuos.compile(lambda t: t * 3)
    torch.testing.assert_close(f(x), x * 3)
    gpuos.reset_stats()
    y = torch.randn(4, 4, device=gpu)
    torch.testing.assert_close(f(y), y * 3)  # new shape: guard miss, traced again
    assert gpuos.stats()["guard_misses"] == 1 and gpuos.stats()["traces"] == 1
    torch.testing.assert_close(f(y), y * 3)  # the new program in C++
    assert f.runs_in_cpp() and gpuos.stats()["compiled_calls"] == 2
    assert f([1]) == [1, 1, 1]  # neither a tensor nor a scalar: eager
    torch.testing.assert_close(f(t=y), y * 3)  # keyword: eager
    w = torch.randn(4, 4, device=gpu, requires_grad=True)
    out = f(w)
    assert out.requires_grad  # ran eagerly, with autograd
    assert "autograd" in gpuos.stats()["fallback_reasons"]


def test_calls_stay_in_python_with_the_fast_call_switch_off(gpu, monkeypatch):
    monkeypatch.setenv("GPUOS_TORCH_FAST_CALL", "0")  # an A/B switch (docs/pytorch.md)
    f = gpuos.compile(lambda t: (t + 1, t * 2))
    x = torch.randn(8, 16, device=gpu)
    for _ in range(3):
        got = f(x)
        assert type(got) is tuple
        torch.testing.assert_close(got, (x + 1, x * 2))
    assert not f.runs_in_cpp()
    assert gpuos.stats()["compiled_calls"] == 3


def test_parameters_are_bound_by_pointer(gpu):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                                torch.nn.Linear(32, 8)).to(gpu)
    x = torch.randn(4, 16, device=gpu)
    f = gpuos.compile(model)
    with torch.no_grad():
        torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-5)
        model[0].weight.add_(0.5)  # in place: the next call must see it
        torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-5)
    assert gpuos.stats()["compiled_calls"] == 2


def test_autograd_runs_eagerly(gpu):
    model = torch.nn.Linear(4, 4).to(gpu)
    f = gpuos.compile(model)
    x = torch.randn(2, 4, device=gpu)
    with torch.no_grad():
        f(x)
    y = f(x)  # grad mode, parameters require grad
    assert y.requires_grad
    assert "autograd" in gpuos.stats()["fallback_reasons"]


def test_torch_compile_backend(gpu):
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
    model = model.to(gpu)
    compiled = torch.compile(model, backend="gpuos")
    x = torch.randn(8, 64, device=gpu)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    s = gpuos.stats()
    assert s["compiled_calls"] >= 3 and s["eager_calls"] == 0, s["fallback_reasons"]


def test_attention_and_outputs_are_torch_tensors(gpu):
    def attention(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1) @ v

    q, k, v = (torch.randn(8, 32, 64, device=gpu) for _ in range(3))
    out = gpuos.compile(attention)(q, k, v)
    torch.testing.assert_close(out, attention(q, k, v), rtol=1e-4, atol=1e-5)
    assert out.is_cuda and out.is_contiguous()
    assert (out * 2).sum().isfinite()  # usable by PyTorch, freed by its allocator
    runtime_stats = gpuos.stats()["runtimes"]["cuda:0"]
    assert runtime_stats["submissions"] >= 1
    assert runtime_stats["completion_fence"] == "gpu"  # CUDA tensors only: GPUOS_TORCH_GPU_FENCE


def _sandwich(x, w):
    y = torch.relu(x @ w) * 2 + 1
    z = torch.cumsum(y, 1)  # no lowering: runs eagerly between two segments
    values, indices = torch.sort(z, dim=-1)
    return (values * 0.5 - z).tanh() + y, indices


def test_split_graph_runs_segments_on_gpu(gpu):
    x, w = torch.randn(16, 32, device=gpu), torch.randn(32, 32, device=gpu)
    f = gpuos.compile(_sandwich)
    for _ in range(3):
        for have, want in zip(f(x, w), _sandwich(x, w)):
            assert have.device == want.device and have.dtype == want.dtype
            torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-5)
    s = gpuos.stats()
    assert s["split_calls"] == 3 and s["submissions"] == 6, s["fallback_reasons"]
    assert s["fallbacks"] == {"aten.cumsum.default": 3, "aten.sort.default": 3}
    assert s["runtimes"]["cuda:0"]["submissions"] >= 6
    # The same plan as the CPU reference run of test_split.py.
    kinds = [type(step).__name__ for step in f.last_plan().steps]
    assert kinds[0] == kinds[-1] == "Segment" and kinds.count("Segment") == 2


def test_torch_compile_backend_with_dynamic_dimension(gpu):
    """After a compile of the same code with other sizes, dynamo passes the
    dynamic batch dimension as an int: it must be specialized, not eager."""
    torch._dynamo.reset()
    with torch.no_grad():
        small = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).to(gpu)
        torch.compile(small, backend="gpuos")(torch.randn(2, 4, device=gpu))
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 64)).to(gpu)
        compiled = torch.compile(model, backend="gpuos")
        x = torch.randn(8, 64, device=gpu)
        gpuos.reset_stats()
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()
    s = gpuos.stats()
    assert s["compiled_calls"] == 3 and s["eager_calls"] == 0, s["fallback_reasons"]
