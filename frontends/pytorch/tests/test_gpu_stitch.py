"""On a GPU: stitched programs (docs/pytorch.md, "Stitched programs").

The benchmark's workloads become one stitched task each and match eager and
the unstitched programs (GPUOS_STITCH=0) on fresh inputs, many calls in a
row (the stage counters count on over the runs); a buffer that is not 16-byte
aligned runs the unstitched program instead; a program with an operator
without stage code is not stitched and says why; a call that does not wait
on the host (GPUOS_TORCH_HOST_WAIT_US=0) leaves the wait to PyTorch's
stream; attention (scores, softmax, product) is one stage of odd shapes too, and
stores the probabilities per head when they are returned; flagged
intermediates (a product's output polled as a later product's operand and
residual) match eager and GPUOS_STITCH_FLAGS=0, on fewer worker blocks than
tiles too; few-rows products of every count of outputs a warp match eager; a
run whose stage wait times out is reported at the next call and the runs
after it are right.
Skipped (with the reason) without a GPU."""

import json
import math
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.utils._pytree as pytree

import gpuos
from gpuos import _runtime

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)

import workloads  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_stats():
    gpuos.reset_stats()


@pytest.fixture
def unstitched(monkeypatch):
    """Compiles with stitching off (GPUOS_STITCH is read when a program is built)."""

    def compile_unstitched(fn):
        f = gpuos.compile(fn)

        def call(*args):
            with monkeypatch.context() as m:
                m.setenv("GPUOS_STITCH", "0")
                return f(*args)

        return call

    return compile_unstitched


def _leaves(value):
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _close(got, want):
    for have, expect in zip(_leaves(got), _leaves(want), strict=True):
        assert have.shape == expect.shape and have.dtype == expect.dtype
        torch.testing.assert_close(have, expect, rtol=1e-4, atol=1e-5)


def _python(script: str, **env: str) -> subprocess.CompletedProcess:
    """`script` run by a fresh Python with `env` added to the environment
    (a variable the runtime reads once, when it opens)."""
    return subprocess.run([sys.executable, "-c", script], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=300)


CASES = [c for c in workloads.cases() if c.workload != "chain100_64x64_f32"]


@pytest.mark.parametrize("case", CASES, ids=[c.name.replace(" ", "_") for c in CASES])
def test_workload_is_one_stitched_task_matching_eager(gpu, unstitched, stitch_notes, case):
    module = workloads.build(case, gpu)
    generator = torch.Generator().manual_seed(7)
    f = gpuos.compile(module)
    plain = unstitched(module)
    with torch.no_grad():
        for _ in range(3):  # new values each time: nothing is cached between calls
            inputs = case.make_inputs(gpu, generator)
            want = module(*inputs)
            _close(f(*inputs), want)
            _close(plain(*inputs), want)
    s = gpuos.stats()
    assert s["stitched_programs"] == 1, s["unstitched"]
    assert s["compiled_calls"] == 6 and s["eager_calls"] == 0, s["fallback_reasons"]
    if case.workload == "mlp_microbatch":  # every Linear's output carries its readiness
        assert any(n.endswith("; flagged outputs: stages 0,1,2,3)") for n in stitch_notes), \
            stitch_notes
    else:  # attention's scores and probabilities are read by nothing else
        assert any("; unread scores and probabilities not stored: stages " in n
                   for n in stitch_notes), stitch_notes
    assert s["tasks"] > 6  # the unstitched program's tasks, one stitched task per call


class _AttentionAndProbabilities(torch.nn.Module):
    """Attention whose probabilities a later op reads (p * 2, an output):
    the stage stores them; its scores, read by nothing else, it does not."""

    def forward(self, q, k, v):
        p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return p @ v, p * 2


def test_attention_stores_probabilities_a_later_op_reads(gpu, stitch_notes):
    module = _AttentionAndProbabilities()
    generator = torch.Generator().manual_seed(11)
    f = gpuos.compile(module)
    with torch.no_grad():
        for _ in range(3):
            q, k, v = (torch.randn(8, 32, 64, generator=generator).to(gpu) for _ in range(3))
            _close(f(q, k, v), module(q, k, v))
    s = gpuos.stats()
    assert s["stitched_programs"] == 1 and s["eager_calls"] == 0, (s["unstitched"], stitch_notes)
    assert any("; unread scores and probabilities not stored: stages 0 (scores)" in n
               for n in stitch_notes), stitch_notes


def test_many_runs_in_a_row_count_on_from_the_last(gpu):
    # Every run waits for its stages' counters to reach its own run's count
    # (they are never reset): new inputs each call, so a stage that started
    # before its inputs were ready would show.
    # Each call is one lone tiled task, which runs as direct tiles (docs/
    # runtime.md, "Direct tiles") unless its gate was still closed when the
    # admitting block read its slot (194-200 of 200 synchronized calls per
    # case in stitch_profile.py, gpu_checks_session25.txt; this test passed
    # there too). Images built with GPUOS_DIRECT_TILES=0 or 2 (A/B switches)
    # have none.
    module = workloads.build(CASES[0], gpu)  # mlp_microbatch batch 1
    f = gpuos.compile(module)
    xs = [torch.randn(1, 256, device=gpu) for _ in range(300)]
    direct_before = json.loads(_runtime.runtime(0).stats_json())["direct_submissions"]
    with torch.no_grad():
        outputs = [f(x) for x in xs]
        for i in list(range(0, 300, 37)) + [299]:
            torch.testing.assert_close(outputs[i], module(xs[i]), rtol=1e-4, atol=1e-5)
    assert gpuos.stats()["stitched_programs"] == 1
    direct = json.loads(_runtime.runtime(0).stats_json())["direct_submissions"] - direct_before
    if re.search(r"GPUOS_DIRECT_TILES=[02]", os.environ.get("GPUOS_JIT_DEFINES", "")) is None:
        assert direct >= 240, f"{direct} of 300 calls ran as direct tiles"


class _ResidualBlock(torch.nn.Module):
    """h = lin1(x); out = h + lin2(layer_norm(h)): h is read as a product's
    a (through the norm prologue) and as its residual."""

    def __init__(self, width: int = 256):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(width, width), torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        h = self.lin1(x)
        return h + self.lin2(self.norm(h))


def test_flagged_operand_and_residual_match_eager_and_unflagged(gpu, monkeypatch, stitch_notes):
    # Docs/stitching.md, "Flagged intermediates": h's values carry their
    # run's tag and the second product polls them twice (as a and as the
    # residual); new inputs every call, so a stale value would show.
    torch.manual_seed(3)
    module = _ResidualBlock().to(gpu)
    flagged = gpuos.compile(module)
    plain = gpuos.compile(module)
    xs = [torch.randn(3, 256, device=gpu) for _ in range(40)]
    with torch.no_grad():
        got = [flagged(x) for x in xs]
        with monkeypatch.context() as m:
            m.setenv("GPUOS_STITCH_FLAGS", "0")  # read when the program is built
            unflagged = [plain(x) for x in xs]
        for x, a, b in zip(xs, got, unflagged):
            want = module(x)
            torch.testing.assert_close(a, want, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(b, want, rtol=1e-4, atol=1e-5)
    assert len(stitch_notes) == 2, stitch_notes
    assert stitch_notes[0].endswith("; flagged outputs: stages 0)"), stitch_notes
    assert "flagged" not in stitch_notes[1], stitch_notes


def test_flagged_stages_run_on_fewer_blocks_than_tiles(gpu):
    """Three worker blocks for mlp batch 4's stitched task of many more tiles
    (a stage spreads over at least 8): a tile that polls flagged values
    starts after every tile it polls (tiles are handed out in order), so the
    program still finishes, and matches eager."""
    script = textwrap.dedent("""
        import sys, torch, gpuos
        sys.path.insert(0, %r)
        import workloads
        case = [c for c in workloads.cases() if c.name == "mlp_microbatch batch=4"][0]
        module = workloads.build(case, torch.device("cuda", 0))
        f = gpuos.compile(module)
        generator = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for _ in range(20):
                inputs = case.make_inputs(torch.device("cuda", 0), generator)
                torch.testing.assert_close(f(*inputs), module(*inputs), rtol=1e-4, atol=1e-5)
        s = gpuos.stats()
        assert s["compiled_calls"] == 20 and s["stitched_programs"] == 1, s
        print("ok")
    """ % BENCH)
    done = _python(script, GPUOS_TORCH_BLOCKS="3")
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


class _TwoProducts(torch.nn.Module):
    """lin2(gelu(layer_norm(lin1(x)))): two few-rows product stages, the
    second with the norm prologue."""

    def __init__(self, k: int, n: int):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(k, n), torch.nn.Linear(n, 64)
        self.norm = torch.nn.LayerNorm(n)

    def forward(self, x):
        return self.lin2(torch.nn.functional.gelu(self.norm(self.lin1(x))))


# (rows, K, N): a warp's outputs (rows x its columns of the tile) reduce-
# scattered over its lanes (stitch.cuh, WarpReduceScatter) in counts of 2,
# 6 (padded to 8, with columns past N), 7 (one column a warp), 16 (mlp
# batch 8), 40 (padded to 64, two a lane) and 64 (two a lane).
FEW_ROWS_SHAPES = [(1, 256, 256), (3, 256, 200), (7, 64, 96), (8, 256, 256), (5, 128, 1024),
                   (8, 128, 1024)]


@pytest.mark.parametrize("shape", FEW_ROWS_SHAPES, ids=[str(s) for s in FEW_ROWS_SHAPES])
def test_few_rows_products_match_eager(gpu, stitch_notes, shape):
    rows, k, n = shape
    torch.manual_seed(11)
    module = _TwoProducts(k, n).to(gpu)
    f = gpuos.compile(module)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(rows, k, device=gpu)
            torch.testing.assert_close(f(x), module(x), rtol=1e-4, atol=1e-5)
    s = gpuos.stats()
    assert s["stitched_programs"] == 1 and s["eager_calls"] == 0, (s["unstitched"], stitch_notes)


class _RectifiedResidualBlock(_ResidualBlock):
    """relu(h + lin2(layer_norm(h))): the relu (an elementwise stage, which
    does not poll flags) waits for the second product's stage counter,
    while that product polls h's flagged values."""

    def forward(self, x):
        return torch.relu(super().forward(x))


def test_failed_run_is_reported_and_the_next_runs_recover(gpu, built):
    """A run whose stage waits for counts that never come (the stitched
    task's counter set as if 1000 runs had finished: the relu stage waits
    for the product's 1001st run) fails after the stage wait's limit, 2 s.
    The failure surfaces at the next call, named; the counters and the
    flagged values' slots are zeroed, so the calls after it are right."""
    programs = built.programs
    torch.manual_seed(11)
    module = _RectifiedResidualBlock().to(gpu)
    f = gpuos.compile(module)
    with torch.no_grad():
        x = torch.randn(2, 256, device=gpu)
        torch.testing.assert_close(f(x), module(x), rtol=1e-4, atol=1e-5)
        assert len(programs) == 1 and programs[0].stitched, [p.stitch_note for p in programs]
        note = programs[0].stitch_note
        assert note.endswith("; flagged outputs: stages 0)") and "relu" in note, note
        programs[0]._testing_set_finished_runs(1000)
        f(x)  # fails on the device after 2 s; the call itself leaves the wait to the stream
        with pytest.raises(RuntimeError, match="an earlier run of this program.*waited 2 s"):
            f(x)
        for _ in range(3):  # new values: a stale flagged value or count would show
            x = torch.randn(2, 256, device=gpu)
            torch.testing.assert_close(f(x), module(x), rtol=1e-4, atol=1e-5)


def test_unaligned_buffer_runs_the_unstitched_program(gpu):
    def block(x, w):
        return torch.nn.functional.gelu(x @ w) * 2.0

    w = torch.randn(64, 32, device=gpu)
    base = torch.randn(8 * 64 + 1, device=gpu)
    aligned = base[:-1].view(8, 64)
    f = gpuos.compile(block)
    torch.testing.assert_close(f(aligned, w), block(aligned, w), rtol=1e-4, atol=1e-5)
    shifted = base[1:].view(8, 64)  # 4 bytes past an aligned address: same layout
    assert shifted.data_ptr() % 16 != 0
    torch.testing.assert_close(f(shifted, w), block(shifted, w), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(f(aligned, w), block(aligned, w), rtol=1e-4, atol=1e-5)
    s = gpuos.stats()
    assert s["stitched_programs"] == 1 and s["traces"] == 1 and s["compiled_calls"] == 3


def test_program_without_stage_code_says_why(gpu):
    def half(x):
        return torch.relu(x.half() * 2) + 1  # f16: stage code is f32 only

    x = torch.randn(16, 16, device=gpu)
    torch.testing.assert_close(gpuos.compile(half)(x), half(x))
    s = gpuos.stats()
    assert s["stitched_programs"] == 0
    assert any("f32 only" in reason for reason in s["unstitched"]), s["unstitched"]


def test_stream_orders_calls_that_do_not_wait_on_the_host(gpu):
    """GPUOS_TORCH_HOST_WAIT_US=0: every call leaves the wait for its results
    to PyTorch's stream; the next op on the stream still sees them."""
    script = textwrap.dedent("""
        import torch, gpuos
        def mlp(x, w1, w2):
            return torch.nn.functional.gelu(x @ w1) @ w2 + 1
        torch.manual_seed(0)
        x, w1, w2 = (torch.randn(n, 64, device="cuda") for n in (4, 64, 64))
        f = gpuos.compile(mlp)
        for _ in range(20):
            y = f(x, w1, w2) * 2.0
            # Outputs of about 50 from sums of 64 products: an element that
            # cancels to near 0 keeps f32 rounding of the terms (2.3e-5 seen
            # at 356ffa1 with unseeded inputs), hence atol 1e-4.
            torch.testing.assert_close(y, mlp(x, w1, w2) * 2.0, rtol=1e-4, atol=1e-4)
        s = gpuos.stats()
        assert s["compiled_calls"] == 20 and s["stitched_programs"] == 1, s
        print("ok")
    """)
    done = _python(script, GPUOS_TORCH_HOST_WAIT_US="0")
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


# A subprocess script's start: attention at seq 128 compiled as `f`, its
# inputs q, k, v.
_ATTENTION_SCRIPT_START = textwrap.dedent("""
    import math, torch, gpuos
    def attention(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(64), dim=-1) @ v
    torch.manual_seed(0)
    q, k, v = (torch.randn(8, 128, 64, device="cuda") for _ in range(3))
    f = gpuos.compile(attention)
""")


@pytest.mark.parametrize("switch, fence", [("1", "gpu"), ("0", "system")])
def test_completion_fence_follows_its_switch_and_results_match(gpu, switch, fence):
    """GPUOS_TORCH_GPU_FENCE (docs/runtime.md, "The completion's fence"): a
    gpu-scope fence before each completion word by default, the system-scope
    one with 0; every call's results right either way. Each call's q is the
    one before's output, read right after the call returns by PyTorch's
    kernels (the reference) and by the next call."""
    script = _ATTENTION_SCRIPT_START + textwrap.dedent("""
        for _ in range(50):
            want = attention(q, k, v)
            got = f(q, k, v)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
            q = got
        s = gpuos.stats()
        assert s["compiled_calls"] == 50 and s["stitched_programs"] == 1, s
        print("fence", s["runtimes"]["cuda:0"]["completion_fence"])
    """)
    # Through the worker (a one-stage program is a tile launch by default,
    # with no completion word to fence).
    done = _python(script, GPUOS_TORCH_GPU_FENCE=switch, GPUOS_TORCH_TILE_LAUNCH="0")
    assert done.returncode == 0 and f"fence {fence}" in done.stdout, done.stdout + done.stderr


def test_stream_tracker_skips_queries_and_keeps_the_order(gpu):
    """GPUOS_TORCH_STREAM_TRACKER=1 (docs/pytorch.md, "Knowing the stream's
    state without a query"): in a loop of calls each followed by a
    synchronize, the calls after the first are published with no query;
    a call right after eager work still pending on the stream (a large
    matmul its input depends on, or cuBLAS's product itself the last
    enqueue) sees that work's result and does not skip its query."""
    script = _ATTENTION_SCRIPT_START + textwrap.dedent("""
        stream = torch.cuda.current_stream()
        for _ in range(30):
            got = f(q, k, v)
            stream.synchronize()
        torch.testing.assert_close(got, attention(q, k, v), rtol=1e-4, atol=1e-5)
        def skipped():
            return gpuos.stats()["runtimes"]["cuda:0"]["stream_queries_skipped"]
        print("tracker", gpuos.stats()["runtimes"]["cuda:0"]["stream_tracker"])
        print("skipped", skipped())
        before = skipped()
        a = torch.randn(4096, 4096, device="cuda")
        for i in range(10):
            pending = (a @ a)[:8, :128].reshape(8, 128, 1) * 0.0  # still running
            x = q * (i + 2) + pending
            got = f(x, k, v)
            torch.testing.assert_close(got, attention(x, k, v), rtol=1e-4, atol=1e-5)
        # cuBLAS's own launch the last enqueue before the call: a batched
        # product writing the call's input.
        lhs = torch.randn(8, 128, 4096, device="cuda")
        rhs = torch.randn(8, 4096, 64, device="cuda") / 64
        for _ in range(10):
            stream.synchronize()  # known idle here, until the product's launch
            x = torch.bmm(lhs, rhs)
            got = f(x, k, v)
            torch.testing.assert_close(got, attention(x, k, v), rtol=1e-4, atol=1e-5)
        # Every one of those calls found work on the stream: none skipped
        # its query.
        print("skipped_with_work", skipped() - before)
        print("ok")
    """)
    # Through the worker: a tile launch (the default for this one-stage
    # program) is ordered by its stream and makes no query to skip.
    done = _python(script, GPUOS_TORCH_STREAM_TRACKER="1", GPUOS_TORCH_TILE_LAUNCH="0")
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr
    state = done.stdout.split("tracker ", 1)[1].splitlines()[0]
    if state != "on":
        pytest.skip(f"the stream tracker did not start here: {state}")
    skipped = int(done.stdout.split("skipped ", 1)[1].splitlines()[0])
    assert skipped >= 20, done.stdout
    assert "skipped_with_work 0" in done.stdout, done.stdout


def _runtime_count(name: str) -> int:
    return json.loads(_runtime.runtime(0).stats_json())[name]


def test_one_stage_programs_run_as_tile_launches_in_stream_order(gpu):
    """A one-stage stitched program (attention) runs as a kernel of its own
    on PyTorch's current stream (docs/pytorch.md, "Tile launches"): each
    call's input comes from a product still running on that stream, and on
    a side stream for some calls (the program's next launch on the default
    stream waits for the side stream's), and every result is right; none
    goes through the worker's queue."""
    def attention(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(64), dim=-1) @ v

    generator = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(8, 128, 64, generator=generator).to(gpu) for _ in range(3))
    big = torch.randn(2048, 2048, generator=generator).to(gpu)
    f = gpuos.compile(attention)
    _close(f(q, k, v), attention(q, k, v))  # traced and built
    launches, direct = _runtime_count("tile_launches"), _runtime_count("direct_submissions")
    side = torch.cuda.Stream(device=gpu)
    runs = []  # checked after all of them: no synchronize between a switch of streams
    for i in range(20):
        stream = side if i % 5 == 4 else torch.cuda.current_stream(gpu)
        with torch.cuda.stream(stream):
            pending = (big @ big)[:8, :128].reshape(8, 128, 1) * 0.0  # still running
            x = q * (1 + i / 20) + pending  # q's scale: scores (and f32 sums' rounding) as _close takes
            runs.append((f(x, k, v), attention(x, k, v)))
    torch.cuda.synchronize(gpu)
    for got, want in runs:
        _close(got, want)
    assert _runtime_count("tile_launches") - launches == 20
    assert _runtime_count("direct_submissions") == direct


def test_one_stage_programs_go_through_the_worker_while_others_keep_it_running(gpu):
    """A launch's blocks wait for a running worker grid to park (docs/pytorch.md,
    "Tile launches"): a one-stage program called right after another
    program's call through the worker goes through the worker too; once only
    its own calls keep the grid running, it asks the grid to park and runs
    as tile launches again. Every result right."""
    def attention(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(64), dim=-1) @ v

    def step(x):
        return x * 0.999 + 0.001

    generator = torch.Generator().manual_seed(12)
    q, k, v = (torch.randn(8, 128, 64, generator=generator).to(gpu) for _ in range(3))
    x = torch.randn(64, 64, generator=generator).to(gpu)
    f, g = gpuos.compile(attention), gpuos.compile(step)
    _close(f(q, k, v), attention(q, k, v))  # traced and built
    launches = _runtime_count("tile_launches")
    _close(g(x), step(x))
    assert _runtime_count("tile_launches") == launches, "the elementwise step is no tile launch"
    runs = []
    for phase in ("mixed", "alone"):
        launches, parks = _runtime_count("tile_launches"), _runtime_count("early_parks")
        for i in range(10):
            if phase == "mixed":
                runs.append((g(x), step(x)))  # through the worker, which then runs
            qi = q * (1 + i / 20)
            runs.append((f(qi, k, v), attention(qi, k, v)))
        made = _runtime_count("tile_launches") - launches
        if phase == "mixed":
            # The grid runs for idle_park (200 us) after each step: the
            # attention calls right after it go through it (a few may find it
            # parked on a slow host, and launch).
            assert made <= 3, f"{made} of 10 attention calls beside the worker were tile launches"
        else:
            # The first call asks the grid its own last calls kept to park
            # (unless it parked by itself), then all launch (one or two more
            # go through the worker when the last run is still in flight).
            assert made >= 8, f"{made} of 10 attention calls alone were tile launches"
            assert _runtime_count("early_parks") - parks <= 1
    torch.cuda.synchronize(gpu)
    for got, want in runs:
        _close(got, want)


def test_tile_launches_off_run_one_stage_programs_through_the_worker(gpu):
    """GPUOS_TORCH_TILE_LAUNCH=0: the same program goes through the worker's
    queue (as direct tiles), results unchanged."""
    script = _ATTENTION_SCRIPT_START + textwrap.dedent("""
        import json
        from gpuos import _runtime
        for i in range(20):
            x = q * (1 + i / 20)
            torch.testing.assert_close(f(x, k, v), attention(x, k, v), rtol=1e-4, atol=1e-5)
        s = json.loads(_runtime.runtime(0).stats_json())
        print("counts", s["tile_launches"], s["submissions"])
    """)
    done = _python(script, GPUOS_TORCH_TILE_LAUNCH="0")
    assert done.returncode == 0 and "counts" in done.stdout, done.stdout + done.stderr
    launches, submissions = map(int, done.stdout.split("counts ", 1)[1].split()[:2])
    assert launches == 0 and submissions >= 20, done.stdout
    bad = _python(_ATTENTION_SCRIPT_START + "f(q, k, v)\n", GPUOS_TORCH_TILE_LAUNCH="2")
    assert bad.returncode != 0 and "GPUOS_TORCH_TILE_LAUNCH" in bad.stderr, bad.stderr


def test_bad_host_wait_is_refused_by_name(gpu):
    script = "import torch, gpuos\nf = gpuos.compile(lambda x: x * 2 + 1)\n" \
             "f(torch.ones(4, device='cuda'))\n"
    done = _python(script, GPUOS_TORCH_HOST_WAIT_US="soon")
    assert done.returncode != 0 and "GPUOS_TORCH_HOST_WAIT_US" in done.stderr, done.stderr


class _Built:
    """The native programs compiled in a test and their stitch notes, as
    they are built."""

    def __init__(self):
        self.programs, self.notes = [], []


@pytest.fixture
def built(monkeypatch):
    record = _Built()
    original = _runtime.STATS.note_program

    def remember(program):
        record.programs.append(program)
        record.notes.append(program.stitch_note)
        original(program)

    monkeypatch.setattr(_runtime.STATS, "note_program", remember)
    return record


@pytest.fixture
def stitch_notes(built):
    """The stitch notes of the programs compiled in the test."""
    return built.notes


# (heads, queries, keys, head dim, value dim, q transposed): queries not a
# multiple of a tile's 8, odd key counts (one lane per key and several),
# head dims that split a key over 1 to 8 lanes, a non-contiguous q, 256
# columns of v. One query a tile (a decode step): 129 keys; 5 keys with dims
# that are no multiple of 32; 250 keys and a non-contiguous q; 600 keys.
# 97 queries of 128 keys: tiles of 10 (more queries than warps), the last
# tile 7; on the tensor cores (32 and 97 queries of 32 and 128 keys, d and
# v's columns 64), tiles of 16, the last of 97 with one query.
ATTENTION_SHAPES = [(8, 32, 32, 64, 64, False), (3, 13, 7, 32, 96, False),
                    (4, 1, 129, 64, 64, False), (2, 20, 200, 128, 16, True),
                    (3, 1, 5, 48, 40, False), (2, 1, 250, 32, 24, True),
                    (2, 1, 600, 64, 64, False), (4, 48, 16, 32, 256, False),
                    (8, 97, 128, 64, 64, False)]
# The attention stage's tiles planned for 2 blocks where they differ from
# 8 queries a tile: one tile a head of 13, three of 16 a head of 48.
FULLER_TILES = {(3, 13, 7, 32, 96, False): 3, (4, 48, 16, 32, 256, False): 12}


@pytest.mark.parametrize("blocks", ["default", "2"])
@pytest.mark.parametrize("shape", ATTENTION_SHAPES, ids=[str(s) for s in ATTENTION_SHAPES])
def test_attention_is_one_stage_matching_eager(gpu, stitch_notes, monkeypatch, shape, blocks):
    # blocks "2": planned for 2 worker blocks, every stage of more than one
    # tile takes fuller tiles (QueriesPerTile): 13 queries a tile for the
    # 13-query heads, 16 for the 48-query ones (3 tiles of 16), where the
    # 132-block plan takes 8.
    if blocks != "default":
        monkeypatch.setenv("GPUOS_STITCH_BLOCKS", blocks)  # read when a program is built
    heads, queries, keys, dim, vdim, transposed = shape

    def attention(q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        probs = torch.softmax(scores, dim=-1)
        return probs @ v, probs

    generator = torch.Generator().manual_seed(3)
    f = gpuos.compile(attention)
    for _ in range(2):
        if transposed:
            q = torch.randn(heads, dim, queries, generator=generator).to(gpu).transpose(1, 2)
        else:
            q = torch.randn(heads, queries, dim, generator=generator).to(gpu)
        k = torch.randn(heads, keys, dim, generator=generator).to(gpu)
        v = torch.randn(heads, keys, vdim, generator=generator).to(gpu)
        _close(f(q, k, v), attention(q, k, v))  # the probabilities are an output too
    tiles = [int(m.group(1)) for n in stitch_notes for m in [re.search(r"\battention\((\d+)\)", n)]
             if m]
    assert tiles, stitch_notes
    if blocks != "default" and shape in FULLER_TILES:
        assert tiles == [FULLER_TILES[shape]], stitch_notes


@pytest.mark.parametrize("mma", ["1", "0"])
def test_attention_stores_its_scores_and_probabilities_on_either_cores(gpu, stitch_notes,
                                                                       monkeypatch, mma):
    # Scores and probabilities both outputs: the stage stores both, on the
    # tensor cores (16-query tiles, GPUOS_STITCH_ATTENTION_MMA unset or 1)
    # and on the CUDA cores (0); 97 queries: the last tile of each head is
    # partly empty.
    monkeypatch.setenv("GPUOS_STITCH_ATTENTION_MMA", mma)  # read when a program is built

    def attention(q, k, v):
        scores = q @ k.transpose(-2, -1) / 8.0
        probs = torch.softmax(scores, dim=-1)
        return probs @ v, scores, probs

    generator = torch.Generator().manual_seed(13)
    f = gpuos.compile(attention)
    for _ in range(2):
        q = torch.randn(4, 97, 64, generator=generator).to(gpu)
        k, v = (torch.randn(4, 128, 64, generator=generator).to(gpu) for _ in range(2))
        _close(f(q, k, v), attention(q, k, v))
    assert any(re.search(r"\battention\((\d+)\)", n) for n in stitch_notes), stitch_notes
    on_tensor_cores = any("on the tensor cores: stages" in n for n in stitch_notes)
    assert on_tensor_cores == (mma == "1"), stitch_notes


def test_attention_of_four_dimensional_heads_returns_its_probabilities(gpu, stitch_notes):
    # The workloads' layout (batch, heads, seq, dim): the softmax sees the
    # scores as rank 4 while the products see rank 3; the stage must store
    # each head's probabilities at the products' strides.
    def attention(q, k, v):
        probs = torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1)
        return probs @ v, probs

    generator = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 8, 32, 64, generator=generator).to(gpu) for _ in range(3))
    _close(gpuos.compile(attention)(q, k, v), attention(q, k, v))
    assert any(re.search(r"\battention\(\d+\)", note) for note in stitch_notes), stitch_notes
