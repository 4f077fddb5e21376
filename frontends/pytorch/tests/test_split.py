"""Graph splitting without a GPU: graphs with unsupported ops (cumsum, sort)
in the middle are split into segments, run by the CPU reference interpreter
(executor="reference"), with the unsupported ops run eagerly in between, and
checked against eager. Also the torch.compile backend's arguments (dynamic
dimensions passed as ints, boxed calls)."""

import pytest
import torch

import gpuos
from gpuos._split import MIN_SEGMENT_TASKS, Segment


@pytest.fixture(autouse=True)
def fresh_stats():
    gpuos.reset_stats()


def sandwich(x, w):
    y = torch.relu(x @ w) * 2 + 1  # segment 1
    z = torch.cumsum(y, 1)  # eager
    values, indices = torch.sort(z, dim=-1)  # eager (two outputs)
    return (values * 0.5 - z).tanh() + y, indices  # segment 2 reads y from segment 1


def kinds(plan):
    return ["S" if isinstance(s, Segment) else s.node.name for s in plan.steps]


def test_split_program_matches_eager():
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    f = gpuos.compile(sandwich, executor="reference")
    for _ in range(3):
        got, want = f(x, w), sandwich(x, w)
        assert type(got) is tuple
        for have, expected in zip(got, want):
            assert have.dtype == expected.dtype and have.shape == expected.shape
            torch.testing.assert_close(have, expected)
    plan = f.last_plan()
    assert kinds(plan) == ["S", "cumsum", "sort", "getitem", "getitem_1", "S"]
    first, second = plan.segments
    # Both lowered to at least MIN_SEGMENT_TASKS tasks, fewer once fused.
    assert sum(first.aten_ops.values()) >= MIN_SEGMENT_TASKS <= sum(second.aten_ops.values())
    assert second.num_tasks == 1  # mul, sub, tanh, add: one fused task
    assert first.runner is not None and second.runner is not None
    assert [n.name for n in second.inputs] == ["getitem", "cumsum", "add"]  # y comes from segment 1
    s = gpuos.stats()
    assert s["split_calls"] == 3 and s["submissions"] == 6  # one per segment and call
    assert s["eager_calls"] == 0 and s["compiled_calls"] == 0 and s["traces"] == 1
    assert s["fallbacks"] == {"aten.cumsum.default": 3, "aten.sort.default": 3}
    assert "no lowering" in s["fallback_reasons"]["aten.cumsum.default"]
    assert s["tasks"] == 3 * (first.num_tasks + second.num_tasks)


def test_segment_tasks_respect_dependencies_in_any_order():
    from gpuos._reference import run_reference

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    f = gpuos.compile(sandwich, executor="reference")
    f(x, w)
    y = torch.relu(x @ w) * 2 + 1
    first = f.last_plan().segments[0]
    for seed in range(3):
        (out,) = run_reference(first.lowered, [x, w], shuffle_seed=seed)
        torch.testing.assert_close(out, y)


def test_tiny_segment_between_eager_ops_runs_eagerly():
    def f(x):
        a = torch.cumsum(x, 0)
        b = a + 1  # one task between two eager ops
        return torch.sort(b, dim=0)[0] * 3 + x  # the last segment has 2 tasks

    x = torch.randn(6, 3)
    cf = gpuos.compile(f, executor="reference")
    torch.testing.assert_close(cf(x), f(x))
    plan = cf.last_plan()
    tiny = plan.segments[0]
    assert tiny.runner is None and "small segment" in tiny.eager_reason
    s = gpuos.stats()
    assert s["fallbacks"]["aten.add.Tensor"] == 1 and s["fallbacks"]["aten.cumsum.default"] == 1
    assert s["submissions"] == 1


def test_unsplit_graph_is_one_program():
    f = gpuos.compile(lambda x: torch.relu(x * 2 + 1), executor="reference")
    x = torch.randn(5, 5)
    torch.testing.assert_close(f(x), torch.relu(x * 2 + 1))
    s = gpuos.stats()
    assert s["compiled_calls"] == 1 and s["submissions"] == 1 and s["split_calls"] == 0
    assert f.last_plan() is None


def test_guards_and_cache_of_split_graphs():
    def f(x):
        return torch.cumsum(x * 2 + 1, 0).exp() * 0.5 - 1

    cf = gpuos.compile(f, executor="reference", cache_size=2)
    a, b = torch.randn(4, 4), torch.randn(3, 4)
    for x in (a, a, b, a, a.t()):
        torch.testing.assert_close(cf(x), f(x))
    s = gpuos.stats()
    assert s["traces"] == 3 and s["split_calls"] == 5 and s["guard_misses"] == 3
    assert s["cache_evictions"] == 1 and s["submissions"] == 10


def test_in_place_ops_on_eager_results():
    def f(x):
        y = torch.cumsum(x, 0)
        y.mul_(2)
        y.add_(x)
        return torch.sort(y, 0)[1], y * y

    x = torch.randn(5, 2)
    cf = gpuos.compile(f, executor="reference")
    for have, want in zip(cf(x), f(x)):
        torch.testing.assert_close(have, want)
    assert gpuos.stats()["submissions"] >= 1


def test_parameters_are_read_at_each_call():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())

    def f(x):
        return torch.cumsum(model(x), 1) @ model[0].weight + 1

    x = torch.randn(3, 8)
    cf = gpuos.compile(f, executor="reference")
    with torch.no_grad():
        torch.testing.assert_close(cf(x), f(x), rtol=1e-5, atol=1e-5)
        model[0].weight.mul_(0.5)  # in place: the next call must see it
        torch.testing.assert_close(cf(x), f(x), rtol=1e-5, atol=1e-5)
    assert gpuos.stats()["split_calls"] == 2


def test_split_calls_needing_autograd_run_eagerly():
    model = torch.nn.Linear(4, 4)
    cf = gpuos.compile(lambda x: torch.cumsum(model(x), 0).relu() * 2, executor="reference")
    x = torch.randn(2, 4)
    y = cf(x)  # grad mode, the parameters require grad
    assert y.requires_grad
    s = gpuos.stats()
    assert "autograd" in s["fallback_reasons"] and s["split_calls"] == 0


def test_scalar_arguments_are_specialized():
    cf = gpuos.compile(lambda x, k, flag: x * k if flag else x - k, executor="reference")
    x = torch.randn(3)
    torch.testing.assert_close(cf(x, 3, True), x * 3)
    torch.testing.assert_close(cf(x, 3, True), x * 3)
    torch.testing.assert_close(cf(x, 4, False), x - 4)
    s = gpuos.stats()
    assert s["traces"] == 2 and s["compiled_calls"] == 3 and s["eager_calls"] == 0


def test_keyword_and_other_arguments_run_eagerly():
    cf = gpuos.compile(lambda x, k=1: x * k, executor="reference")
    torch.testing.assert_close(cf(torch.ones(2), k=3), torch.full((2,), 3.0))
    torch.testing.assert_close(cf(torch.ones(2), [3][0]), torch.full((2,), 3.0))
    cg = gpuos.compile(lambda x, ks: x * ks[0], executor="reference")
    torch.testing.assert_close(cg(torch.ones(2), [3]), torch.full((2,), 3.0))
    s = gpuos.stats()
    assert s["eager_calls"] == 2 and s["compiled_calls"] == 1
    assert "signature" in s["fallback_reasons"]


def test_lower_split_names_every_eager_node():
    from gpuos._lowering import lower

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    gm = gpuos._compile.trace(sandwich, (x, w))
    program = lower(gm, [x, w], split=True)
    assert sorted(n.name for n in program.eager_nodes) == ["cumsum", "sort"]
    whole = lower(gm, [x, w])
    # Without split, sort's input is poisoned by cumsum: only cumsum is named.
    assert not whole.eager_nodes and set(whole.unsupported) == {"aten.cumsum.default"}
    assert set(program.unsupported) == {"aten.cumsum.default", "aten.sort.default"}


# ---- the torch.compile backend ----

def test_backend_specializes_dynamic_dimensions():
    """A second model of the same code (Sequential.forward) with new sizes is
    recompiled by dynamo with a dynamic batch dimension: the graph gets a
    SymInt placeholder and each call passes it as a plain int. That made
    every call of the backend run eagerly (reason "signature") on the H200."""
    torch._dynamo.reset()
    small = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))
    graphs = []

    def spy(gm, example_inputs, **options):
        graphs.append([type(a).__name__ for a in example_inputs])
        return gpuos.backend(gm, example_inputs, options={"executor": "reference"})

    with torch.no_grad():
        torch.compile(small, backend=spy)(torch.randn(2, 4))
        compiled = torch.compile(model, backend=spy)
        x = torch.randn(8, 16)
        gpuos.reset_stats()
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()
    assert len(graphs) == 2 and "SymInt" in graphs[1], graphs  # the cause, as dynamo does it
    s = gpuos.stats()
    assert s["compiled_calls"] == 3 and s["eager_calls"] == 0, s["fallback_reasons"]
    assert s["traces"] == 1


def test_backend_accepts_a_boxed_call():
    def f(a, b):
        return (a + b) * 2,

    gm = torch.fx.symbolic_trace(f)
    fn = gpuos.backend(gm, [], options={"executor": "reference"})
    a, b = torch.randn(3), torch.randn(3)
    (out,) = fn([a, b])
    torch.testing.assert_close(out, (a + b) * 2)
    (out,) = fn(a, b)
    torch.testing.assert_close(out, (a + b) * 2)
    assert gpuos.stats()["compiled_calls"] == 2


def test_backend_on_cpu_with_split_graph():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.b(torch.cumsum(torch.relu(self.a(x)), -1)).sigmoid()

    torch._dynamo.reset()
    model = Model()
    compiled = torch.compile(model, backend=gpuos.backend, options={"executor": "reference"})
    x = torch.randn(4, 8)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()
    s = gpuos.stats()
    assert s["split_calls"] == 2 and s["fallbacks"] == {"aten.cumsum.default": 2}


def test_graph_returning_a_parameter_and_an_input():
    model = torch.nn.Linear(3, 3)

    def f(x):
        return torch.cumsum(x, 0) * 2 + 1, model.weight, x

    x = torch.randn(4, 3)
    cf = gpuos.compile(f, executor="reference")
    with torch.no_grad():
        got = cf(x)
    torch.testing.assert_close(got[0], torch.cumsum(x, 0) * 2 + 1)
    assert got[1] is model.weight and got[2] is x
    assert gpuos.stats()["split_calls"] == 1


def test_split_program_returns_the_function_s_containers():
    """A list (and a dict) come back as the function returned them, not as the
    traced graph's immutable_list / immutable_dict."""

    def listed(x, w):
        y = torch.relu(x @ w) * 2 + 1
        z = torch.cumsum(y, 1)  # eager
        return [(z * 0.5).tanh() + y, {"z": z}]

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    f = gpuos.compile(listed, executor="reference")
    for _ in range(2):
        got, want = f(x, w), listed(x, w)
        assert type(got) is list and type(got[1]) is dict
        got.append(None)  # a plain list
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1]["z"], want[1]["z"])
    assert f.last_plan() is not None
