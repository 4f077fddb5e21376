"""gpuos.batching(record=False), step 1: the C++ interception (CPU; docs/pytorch.md,
"Transparent batching"). Ops inside a block are seen by name and run by the
kernels below the key, so every result must equal eager's. These tests open
blocks with record=False (interception only); recording is tested in
test_batching_record.py."""

import threading

import pytest
import torch

import gpuos
from gpuos import _runtime

pytestmark = pytest.mark.skipif(_runtime._C is None, reason=f"{_runtime.EXTENSION_ERROR}")


@pytest.fixture(autouse=True)
def clean_counts():
    gpuos.reset_batching_stats()
    yield
    assert gpuos.batching_stats()["depth"] == 0, "a test left a batching block open"


def test_the_default_executor_records_nothing_on_the_cpu():
    x, w = inputs()
    with gpuos.batching():
        y = small(x, w)
    assert torch.equal(y, small(x, w))
    s = gpuos.batching_stats()
    assert s["ran_eagerly"] == 4 and s["recorded"] == 0 and s["submissions"] == 0
    assert "executor runs on cuda" in s["fallback_reasons"]["aten::mm"]


def small(x, w):
    return torch.relu(x @ w * 2 + 1)


SMALL_OPS = {"aten::mm": 1, "aten::mul.Tensor": 1, "aten::add.Tensor": 1, "aten::relu": 1}


def inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 5, generator=g), torch.randn(5, 3, generator=g)


def test_ops_inside_a_block_are_seen_by_name():
    x, w = inputs()
    with gpuos.batching(record=False):
        small(x, w)
        assert gpuos.batching_stats()["depth"] == 1
    s = gpuos.batching_stats()
    assert s["ops"] == SMALL_OPS
    assert s["ran_eagerly"] == 4 and s["recorded"] == 0 and s["flushes"] == 0


def test_ops_outside_a_block_are_not_seen():
    x, w = inputs()
    small(x, w)
    with gpuos.batching(record=False):
        pass
    small(x, w)
    assert gpuos.batching_stats()["ops"] == {}
    assert gpuos._batching.RECORDS  # the benchmark runs gpuos_batching on this


def test_results_equal_eager():
    torch.manual_seed(1)
    x, w = inputs()

    def many(x, w):
        y = small(x, w)
        z = torch.zeros(8, 3)
        z.add_(y).mul_(0.5)  # in place
        v = z.t().contiguous().view(-1)[2:9]  # views
        r = torch.randn(4)  # a factory op with the global generator
        return y, z, v, r, torch.softmax(y, dim=1), (y > 1).sum(), y.mean().item()

    torch.manual_seed(2)
    expected = many(x, w)
    torch.manual_seed(2)
    with gpuos.batching(record=False):
        got = many(x, w)
    for e, g in zip(expected, got):
        if isinstance(e, torch.Tensor):
            assert torch.equal(e, g) and e.dtype == g.dtype and e.stride() == g.stride()
        else:
            assert e == g
    assert gpuos.batching_stats()["ops"]["aten::randn"] == 1


def test_blocks_nest_and_only_the_outermost_closes():
    x, w = inputs()
    with gpuos.batching(record=False):
        with gpuos.batching(record=False):
            assert gpuos.batching_stats()["depth"] == 2
            small(x, w)
        assert gpuos.batching_stats()["depth"] == 1
        small(x, w)  # still intercepted
    small(x, w)
    assert gpuos.batching_stats()["ops"] == {k: 2 * v for k, v in SMALL_OPS.items()}


def test_exceptions_restore_the_state():
    x, w = inputs()
    with pytest.raises(KeyError):
        with gpuos.batching(record=False):
            with gpuos.batching(record=False):
                raise KeyError("inside")
    assert gpuos.batching_stats()["depth"] == 0
    # An op that fails inside a block fails as in eager and leaves the block usable.
    with pytest.raises(RuntimeError) as eager_error:
        x @ x
    with gpuos.batching(record=False):
        with pytest.raises(RuntimeError) as block_error:
            x @ x
        small(x, w)
    assert str(block_error.value) == str(eager_error.value)
    small(x, w)
    assert gpuos.batching_stats()["ops"]["aten::relu"] == 1


def test_closing_a_block_that_is_not_open_raises():
    with pytest.raises(RuntimeError, match="none open"):
        gpuos.batching().__exit__(None, None, None)


def test_autograd_records_its_graph_inside_a_block():
    x, w = inputs()
    w_eager = w.clone().requires_grad_()
    small(x, w_eager).sum().backward()
    w_block = w.clone().requires_grad_()
    with gpuos.batching(record=False):
        y = small(x, w_block)
        assert y.grad_fn is not None  # autograd runs above the key
        forward = dict(gpuos.batching_stats()["ops"])
        y.sum().backward()
    assert torch.equal(w_block.grad, w_eager.grad)
    ops = gpuos.batching_stats()["ops"]
    assert forward == SMALL_OPS
    assert ops["aten::threshold_backward"] == 1  # relu's backward, run inside the block
    assert ops["aten::mm"] == 2  # forward and x^T @ grad


def test_backward_outside_the_block_is_not_seen():
    x, w = inputs()
    w = w.requires_grad_()
    with gpuos.batching(record=False):
        y = small(x, w).sum()
    gpuos.reset_batching_stats()
    y.backward()
    assert gpuos.batching_stats()["ops"] == {} and w.grad is not None


def test_inference_mode_counts_the_same_ops():
    x, w = inputs()
    with torch.inference_mode(), gpuos.batching(record=False):
        y = small(x, w)
    s = gpuos.batching_stats()
    # matmul is CompositeImplicitAutograd: without autograd it reaches the key
    # itself and is passed on to decompose; its mm is counted.
    assert s["ops"] == SMALL_OPS and s["decomposed"] >= 1
    assert torch.equal(y, small(x, w))


def test_a_python_dispatch_mode_inside_a_block_still_sees_the_ops():
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Names(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x, w = inputs()
    with gpuos.batching(record=False), Names():
        y = small(x, w)
    assert torch.equal(y, small(x, w))
    assert sorted(seen) == ["aten.add.Tensor", "aten.mm.default", "aten.mul.Tensor",
                            "aten.relu.default"]
    assert gpuos.batching_stats()["ops"] == SMALL_OPS


def test_blocks_do_not_leak_into_other_threads():
    x, w = inputs()
    inside = threading.Barrier(2)
    other = {}

    def worker():
        inside.wait()  # the main thread's block is open now
        small(x, w)
        other["stats"] = gpuos.batching_stats()
        inside.wait()

    thread = threading.Thread(target=worker)
    thread.start()
    with gpuos.batching(record=False):
        inside.wait()
        inside.wait()  # the worker ran its ops while this block was open
        small(x, w)
    thread.join()
    assert other["stats"]["ops"] == {} and other["stats"]["depth"] == 0
    assert gpuos.batching_stats()["ops"] == SMALL_OPS


def test_a_thread_started_inside_a_block_is_not_intercepted():
    x, w = inputs()
    other = {}

    def worker():
        with gpuos.batching(record=False):
            small(x, w)
        small(x, w)
        other["stats"] = gpuos.batching_stats()

    with gpuos.batching(record=False):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert other["stats"]["ops"] == SMALL_OPS  # its own block only
    assert gpuos.batching_stats()["ops"] == {}


def test_a_recorder_is_asked_per_op_and_flushed_before_eager_ops_and_at_exit():
    x, w = inputs()
    gpuos._runtime._C._batching_probe(True)
    try:
        with gpuos.batching(record=False):
            small(x, w)
    finally:
        probe = gpuos._runtime._C._batching_probe(False)
    assert probe["decisions"] == 4
    assert probe["arguments"] >= 4 * 2  # each op's arguments were on the stack
    assert probe["flushes"] == 4 + 1
    s = gpuos.batching_stats()
    assert s["flushes"] == 5 and s["ran_eagerly"] == 4 and s["recorded"] == 0
