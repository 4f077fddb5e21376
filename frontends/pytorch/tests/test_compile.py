"""gpuos.compile without a GPU: import, fallbacks counted by op name, the
bounded cache of input layouts, the torch.compile backend."""

import subprocess
import sys

import pytest
import torch

import gpuos


@pytest.fixture(autouse=True)
def fresh_stats():
    gpuos.reset_stats()


def test_import_needs_no_gpu():
    code = ("import gpuos, torch; f = gpuos.compile(lambda x: x + 1); "
            "print(f(torch.ones(2)).tolist(), gpuos.stats()['eager_calls'])")
    env = {"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}
    import os

    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[2.0,", "2.0]", "1"]


def test_cpu_inputs_run_eagerly_and_say_why():
    f = gpuos.compile(lambda x: torch.relu(x) * 2)
    x = torch.randn(4, 4)
    torch.testing.assert_close(f(x), torch.relu(x) * 2)
    s = gpuos.stats()
    assert s["eager_calls"] == 1 and s["compiled_calls"] == 0 and s["traces"] == 1
    assert s["fallbacks"] == {"aten.relu.default": 1, "aten.mul.Tensor": 1}
    assert "CUDA" in s["fallback_reasons"]["device"]


def test_unsupported_ops_are_counted_by_name():
    f = gpuos.compile(lambda x: torch.cumsum(x, 0) + 1)
    for _ in range(3):
        f(torch.randn(5))
    s = gpuos.stats()
    assert s["fallbacks"]["aten.cumsum.default"] == 3
    assert s["fallbacks"]["aten.add.Tensor"] == 3
    assert s["traces"] == 1  # the layout's entry is cached, even when eager
    assert "no lowering" in s["fallback_reasons"]["aten.cumsum.default"]


def test_layouts_are_cached_and_bounded():
    f = gpuos.compile(lambda x: x * 3, cache_size=2)
    shapes = [(2,), (3,), (2,), (4,), (3,)]
    for shape in shapes:
        torch.testing.assert_close(f(torch.ones(shape)), torch.full(shape, 3.0))
    s = gpuos.stats()
    # (2,) hit once; (4,) evicts (3,), which is traced again.
    assert s["traces"] == 4 and s["cache_evictions"] == 2
    assert f.cached_layouts() == 2


def test_strides_and_dtypes_are_part_of_the_layout():
    f = gpuos.compile(lambda x: x + 1)
    x = torch.randn(4, 4)
    f(x)
    f(x.t())
    f(x.double())
    assert gpuos.stats()["traces"] == 3


def test_non_tensor_arguments_run_eagerly():
    # Scalars are specialized (test_split.py); other objects and keywords run eagerly.
    f = gpuos.compile(lambda x, k: x * k[0])
    torch.testing.assert_close(f(torch.ones(2), [3]), torch.full((2,), 3.0))
    assert "signature" in gpuos.stats()["fallback_reasons"]
    g = gpuos.compile(lambda x, k=1: x * k)
    torch.testing.assert_close(g(torch.ones(2), k=3), torch.full((2,), 3.0))
    assert gpuos.stats()["eager_calls"] == 2 and gpuos.stats()["traces"] == 0


def test_torch_compile_backend_on_cpu():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = torch.compile(model, backend=gpuos.backend)
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert gpuos.stats()["eager_calls"] >= 1  # CPU tensors: gpuos ran nothing


def test_stats_shape():
    s = gpuos.stats()
    for key in ("submissions", "tasks", "eager_calls", "traces", "guard_misses", "fallbacks",
                "fallback_reasons", "runtimes"):
        assert key in s


def test_available_reports_why_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    ok, why = gpuos.available()
    assert not ok
    assert "no CUDA device" in why or "extension" in why


@pytest.mark.parametrize(
    "name, value, what",
    [("GPUOS_TORCH_BLOCKS", value, "a worker block count")
     for value in ("0", "abc", "12x", "5000", "-1")]
    + [("GPUOS_TORCH_POLLERS", value, "a poller count") for value in ("0", "x", "65")]
    + [("GPUOS_TORCH_STREAM_TRACKER", value, "0 or 1") for value in ("2", "on")])
def test_bad_worker_counts_are_refused_by_name(monkeypatch, name, value, what):
    # Checked before any CUDA call, so this runs without a GPU too.
    try:
        from gpuos import _C
    except ImportError as error:
        pytest.skip(f"the extension is not built: {error}")
    monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match=f"{name} must be {what}"):
        _C.Runtime(0)


def test_stats_count_stitched_programs_and_why_others_are_not():
    from gpuos import _runtime

    class Built:  # what gpuos._C.Program reports about itself
        def __init__(self, stitched, note):
            self.stitched, self.stitch_note = stitched, note

    gpuos.reset_stats()
    _runtime.STATS.note_program(Built(True, "stitched_0123 (stitched: 2 stages: ...)"))
    _runtime.STATS.note_program(Built(False, "not stitched: task 0 (cast): f16"))
    _runtime.STATS.note_program(Built(False, "not stitched: task 0 (cast): f16"))
    _runtime.STATS.note_program(Built(False, ""))  # one task: not tried
    s = gpuos.stats()
    assert s["stitched_programs"] == 1
    assert s["unstitched"] == {"not stitched: task 0 (cast): f16": 2}
    gpuos.reset_stats()
    assert gpuos.stats()["stitched_programs"] == 0 and gpuos.stats()["unstitched"] == {}


def test_results_keep_the_function_s_output_structure():
    """A compiled call rebuilds what the function returns from the run's flat
    outputs: one tensor, a tuple or list of tensors (the fast path, no
    pytree), and any other tree (a dict, a namedtuple, nesting)."""
    from collections import namedtuple

    from gpuos._compile import unflattener

    Pair = namedtuple("Pair", "a b")
    x = torch.randn(4, 4)
    functions = {
        "tensor": lambda t: t + 1,
        "tuple": lambda t: (t + 1, t * 2, t - 3),
        "list": lambda t: [t + 1, t * 2],
        "dict": lambda t: {"a": t + 1, "b": (t * 2, t - 3)},
        "namedtuple": lambda t: Pair(t + 1, t * 2),
    }
    for name, fn in functions.items():
        f = gpuos.compile(fn, executor="reference")
        for _ in range(2):  # the first call traces; the second replays
            got, want = f(x), fn(x)
            assert type(got) is type(want), name
            torch.testing.assert_close(got, want, msg=name)
    leaves = [torch.zeros(1), torch.ones(1)]
    import torch.utils._pytree as pytree

    assert unflattener(pytree.tree_flatten((1, 2))[1]) is tuple
    assert unflattener(pytree.tree_flatten([1, 2])[1]) is list
    nested = unflattener(pytree.tree_flatten((1, (2,)))[1])
    assert nested not in (tuple, list)
    assert type(nested([leaves[0], leaves[1]])[1]) is tuple


def test_calls_go_through_the_cpp_base_and_its_slow_path_without_a_gpu():
    """With the extension, gpuos.compile's callable derives from
    gpuos._C.FastCallable; with no program set for C++ (the reference
    executor here), every call reaches _call_slow, keyword arguments
    included, and nothing counts as a call run in C++."""
    from gpuos import _runtime
    from gpuos._compile import CompiledFunction

    if _runtime._C is None:
        pytest.skip(f"the extension is not built here: {_runtime.EXTENSION_ERROR}")
    assert issubclass(CompiledFunction, _runtime._C.FastCallable)
    f = gpuos.compile(lambda x, scale=1.0: x * scale + 1, executor="reference")
    x = torch.randn(3, 3)
    for _ in range(2):
        torch.testing.assert_close(f(x), x + 1)
    torch.testing.assert_close(f(x, scale=2.0), x * 2 + 1)  # keyword: runs eagerly
    assert not f.runs_in_cpp()
    assert _runtime._C.fast_call_counts() == (0, 0)
    s = gpuos.stats()
    assert s["compiled_calls"] == 2 and s["eager_calls"] == 1


def test_the_cpp_call_path_refuses_what_is_not_a_program():
    from gpuos import _runtime

    if _runtime._C is None:
        pytest.skip(f"the extension is not built here: {_runtime.EXTENSION_ERROR}")
    f = gpuos.compile(lambda x: x + 1, executor="reference")
    with pytest.raises(TypeError, match="gpuos._C.Program"):
        f._set_fast(object(), 0)
    with pytest.raises(ValueError, match="kind"):
        f._set_fast(None, 4)
    with pytest.raises(TypeError, match="kind 3"):
        f._set_fast(None, 3)  # unflatten without its callable
    with pytest.raises(TypeError, match="kind 3"):
        f._set_fast(None, 0, list)  # a callable that only kind 3 takes
    with pytest.raises(TypeError, match="callable"):
        f._set_fast(None, 3, 42)
    with pytest.raises(TypeError, match="2 or 3 arguments"):
        f._set_fast(None)
    f._set_fast(None, 3, dict)  # accepted; with no program, calls stay in Python
    assert not f.runs_in_cpp()
    f._set_fast(None, 1)  # none: calls stay in Python
    assert not f.runs_in_cpp()
    torch.testing.assert_close(f(torch.ones(2)), torch.full((2,), 2.0))
    bare = _runtime._C.FastCallable()
    with pytest.raises(AttributeError, match="_call_slow"):
        bare(torch.ones(1))


@pytest.mark.parametrize("name", ["GPUOS_FUSION", "GPUOS_STITCH", "GPUOS_STITCH_ATTENTION",
                                  "GPUOS_STITCH_ATTENTION_MMA", "GPUOS_STITCH_FLAGS",
                                  "GPUOS_TORCH_OVERLAP", "GPUOS_TORCH_OPEN_LATER",
                                  "GPUOS_TORCH_FAST_CALL", "GPUOS_TORCH_GPU_FENCE",
                                  "GPUOS_TORCH_TILE_LAUNCH"])
@pytest.mark.parametrize("value", ["off", "false", "2", " 0"])
def test_a_switch_set_to_anything_but_0_or_1_is_refused_by_name(monkeypatch, name, value):
    """Checked before the runtime opens (and GPUOS_FUSION where it is read),
    so this runs without a GPU too; 0, 1 and unset are accepted."""
    from gpuos import _runtime

    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"{name} must be 0 or 1"):
        _runtime.check_switches()
    if name == "GPUOS_FUSION":
        from gpuos import _fusion

        with pytest.raises(ValueError, match="GPUOS_FUSION must be 0 or 1"):
            _fusion.enabled()
    for good in ("0", "1", ""):
        monkeypatch.setenv(name, good)
        _runtime.check_switches()
