"""The PyTorch benchmark's plumbing on the CPU (bench/run_workloads.py
--smoke): every workload is built, run eagerly and through gpuos.compile with
the reference executor, checked against eager and timed; the CUDA-only
variants are recorded as skipped with the reason; the JSON document has the
fields of the benchmarking conventions and the issue-5 targets."""

import json
import os
import sys

import pytest
import torch

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)

import report  # noqa: E402
import run_workloads  # noqa: E402
import variants  # noqa: E402
import workloads  # noqa: E402

CASE_FIELDS = {"workload", "variant", "median_us", "p10_us", "p90_us", "iterations", "correct"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    doc = run_workloads.main(["--smoke", "--out", str(out)])
    return doc, out


def test_smoke_writes_the_document(smoke):
    doc, out = smoke
    with open(out / "pytorch_workloads.json") as f:
        assert json.load(f) == json.loads(json.dumps(doc))
    assert doc["smoke"] and doc["complete"] and doc["commit"] and doc["device"]
    assert doc["torch"] == torch.__version__
    names = [c.name for c in workloads.cases()]
    assert len(names) == 7  # chain100, mlp x3, attention x2, decoder_step
    assert [r["case"] for r in doc["cases"]] == [n for n in names for _ in variants.VARIANTS]
    for row in doc["cases"]:
        assert CASE_FIELDS <= row.keys()


def test_the_floor_of_every_case_is_recorded(smoke):
    # On the CPU there are no device rates: traffic and flops only (floor.py).
    doc, _ = smoke
    assert [r["case"] for r in doc["floors"]] == [c.name for c in workloads.cases()]
    for row in doc["floors"]:
        assert row["bytes"] == row["bytes_read"] + row["bytes_written"] > 0
        assert row["flops"] >= 0 and "floor_us" not in row


def test_the_host_load_is_recorded_for_every_case(smoke):
    # A busy host slows every variant's host part (session 30: eager mlp at
    # 3-4x its usual time in one run); the document says how busy it was.
    doc, _ = smoke
    load = doc["host_load"]
    assert load["cpus"] == os.cpu_count()
    # The host's CPU model, where the OS tells it (eager's time differs by up
    # to 2x between instances): run_workloads._host_cpu, tested below.
    assert load["cpu_model"] == run_workloads._host_cpu()
    assert set(load["at_case_start"]) == {c.name for c in workloads.cases()}
    for value in [load["at_start"], load["at_end"], *load["at_case_start"].values()]:
        assert value is None or value >= 0.0


def test_eager_and_gpuos_compile_ran_correctly_on_one_submission(smoke):
    doc, _ = smoke
    counts = run_workloads.SMOKE_COUNTS
    for row in doc["cases"]:
        if row["variant"] not in ("eager", "gpuos_compile"):
            continue
        assert "skipped" not in row and "error" not in row, row
        assert row["correct"] is True, row
        assert row["iterations"] == counts["rounds"] * counts["block"]
        assert 0 < row["p10_us"] <= row["median_us"] <= row["p90_us"]
        if row["variant"] == "gpuos_compile":
            g = row["gpuos"]  # the whole workload lowered: no eager op, one submission per call
            assert g["executor"] == "reference" and g["eager_calls"] == 0 and not g["fallbacks"]
            assert g["submissions_per_call"] == 1 and g["tasks_per_call"] >= 1
            # The reference executor opens no runtime: no grid, no direct tiles.
            assert g["worker_launches"] == 0 and g["direct_submissions"] == 0
            assert row["speedup_vs"]["eager"] > 0


def test_cuda_only_variants_are_skipped_with_a_reason(smoke):
    doc, _ = smoke
    for row in doc["cases"]:
        if row["variant"] in ("eager", "gpuos_compile"):
            continue
        assert row["median_us"] is None and row["correct"] is None and row["skipped"]
        if row["variant"] == "gpuos_batching" and not variants._batching_records():
            assert row["skipped"] == variants.NOT_IMPLEMENTED_BATCHING


def test_targets_name_every_case_and_baseline(smoke):
    doc, _ = smoke
    per_case = [t for t in doc["targets"] if "case" in t]
    chain = [t for t in per_case if t["workload"] == "chain100_64x64_f32"]
    assert {(t["variant"], t["vs"], t["required_speedup"]) for t in chain} == {
        ("gpuos_compile", "eager", 25.0), ("gpuos_compile", "cuda_graph", 3.0),
        ("gpuos_compile", "torch_compile", 1.0), ("gpuos_batching", "eager", 2.0)}
    others = [t for t in per_case if t["workload"] != "chain100_64x64_f32"]
    assert len(others) == 2 * 6
    for t in per_case:
        if t["measured_speedup"] is None:  # a baseline the smoke run does not have
            assert not t["met"] and t["why"]
    vs_eager = next(t for t in chain if t["variant"] == "gpuos_compile" and t["vs"] == "eager")
    assert vs_eager["measured_speedup"] is not None
    assert vs_eager["met"] == (vs_eager["measured_speedup"] >= 25.0)
    assert doc["targets"][-1]["target"] == "every case correct" and not doc["targets"][-1]["met"]


def test_a_wrong_variant_is_reported_not_correct():
    rows = [{"case": "c", "workload": "mlp_microbatch", "variant": v, "median_us": m,
             "correct": ok} for v, m, ok in (("eager", 30.0, True), ("cuda_graph", 12.0, True),
                                             ("gpuos_compile", 5.0, False))]
    report.add_speedups(rows)
    assert rows[2]["speedup_vs"] == {"eager": 6.0, "cuda_graph": 2.4}
    found = {t["vs"]: t for t in report.targets(rows) if "case" in t}
    assert not found["eager"]["met"] and "not correct" in found["eager"]["why"]
    assert report.targets(rows)[-1]["not_correct"] == ["c gpuos_compile"]


def test_compare_catches_a_poisoned_element():
    expected = [torch.ones(3, 3)]
    got = torch.ones(3, 3)
    assert run_workloads._compare(got, expected)[0]
    got[1, 2] = float("nan")
    ok, _, why = run_workloads._compare(got, expected)
    assert not ok and "output 0" in why
    assert not run_workloads._compare((got, got), expected)[0]


def test_the_timed_synchronize_is_recorded(smoke, tmp_path):
    doc, _ = smoke
    assert "looked up once per case" in doc["method"]["timing"]
    per_call = run_workloads.main(["--smoke", "--sync", "per-call", "--cases", "chain100",
                                   "--out", str(tmp_path)])
    assert "inside every timed call" in per_call["method"]["timing"]
    assert [r["correct"] for r in per_call["cases"] if r["variant"] == "gpuos_compile"] == [True]
    with pytest.raises(SystemExit):
        run_workloads.main(["--smoke", "--sync", "never", "--out", str(tmp_path)])


def test_tile_starts_ranks_tiles_from_the_opening():
    import tile_starts

    def x(cat, name, ts, dur, tid, sequence):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid,
                "args": {"sequence": sequence}}

    events = []
    for s in (1, 2):
        base = 100.0 * s
        events.append(x("queue", "admit", base, 3.0, 0, s))          # opening at base + 3
        events.append(x("task", "stitched", base + 4.0, 2.0, 0, s))  # the admitter: +1
        events.append(x("task", "stitched", base + 5.0, 2.0, 7, s))  # a helper: +2
        events.append(x("task", "stitched", base + 6.5, 2.0, 1, s))  # a late poller: +3.5
        events.append(x("queue", "complete", base + 9.0, 1.0, 1, s))  # 0.5 after the last end
        # Helpers' records: began 1.0, 1.5 and 2.0 after the claim (first,
        # median and last apart), saw the opening 0.5, 0.75 and 1.0 after it
        # (after the complete record, so that a help record taken for a
        # completion would move that median).
        events.append(x("queue", "help", base + 1.0, 2.5, 7, s))
        events.append(x("queue", "help", base + 1.5, 2.25, 5, s))
        events.append(x("queue", "help", base + 2.0, 2.0, 1, s))
        events.append(x("queue", "help", base + 0.5, 50.0, 9, s))  # gave up: left out
    events.append({"ph": "M", "name": "thread_name"})  # metadata is ignored
    summary = tile_starts.tile_starts(events, 300)
    assert summary["submissions"] == 2
    assert summary["start_by_rank_us"] == {0: 1.0, 1: 2.0, 2: 3.5}
    assert summary["admitter_first_us"] == 1.0
    assert summary["latest_helpers"][0] == {"block": 1, "first_start_us": 3.5}
    assert summary["last_end_to_complete_us"] == 0.5
    assert summary["help_start_us"] == {"first": 1.0, "median": 1.5, "last": 2.0}
    assert summary["help_sees_opening_us"] == 0.75
    assert tile_starts.tile_starts(events, 1)["submissions"] == 1
    no_helps = [e for e in events if e.get("name") != "help"]
    assert tile_starts.tile_starts(no_helps, 300)["help_start_us"] == {}


@pytest.mark.parametrize("text, model", [
    ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t: fpu\n"
     "model name\t: Other\n", "Intel(R) Xeon(R) Processor"),  # the first one
    ("processor\t: 0\nmodel name\t:\n", None),  # empty
    ("processor\t: 0\nCPU part\t: 0xd40\n", None),  # none (some ARM kernels)
])
def test_the_host_cpu_model_is_the_first_model_name(tmp_path, text, model):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert run_workloads._host_cpu(str(cpuinfo)) == model
    assert run_workloads._host_cpu(str(tmp_path / "missing")) is None


def test_a_failing_floor_leaves_the_document_whole(tmp_path, monkeypatch):
    def broken(doc):
        raise RuntimeError("no traffic")

    monkeypatch.setattr(run_workloads.floor, "floors", broken)
    doc = run_workloads.main(["--smoke", "--out", str(tmp_path), "--cases", "chain100"])
    assert doc["complete"] and doc["floors"] == []
    assert doc["floors_error"] == "RuntimeError: no traffic"
    with open(tmp_path / "pytorch_workloads.json") as f:
        assert json.load(f)["floors_error"] == "RuntimeError: no traffic"


def test_commit_label_names_head_and_says_when_the_tree_differs(tmp_path, monkeypatch):
    """A result is labelled with the commit whose code ran: GPUOS_COMMIT when
    set, else HEAD, marked "-modified" when tracked files differ from it (on
    the GPU machine the copied tree sits beside an older .git)."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    monkeypatch.delenv("GPUOS_COMMIT", raising=False)
    assert run_workloads.commit_label(str(tmp_path)) == "unknown"  # not a checkout

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("commit", "-q", "-m", "first")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert run_workloads.commit_label(str(tmp_path)) == head
    (tmp_path / "notes.txt").write_text("untracked files do not count\n")
    assert run_workloads.commit_label(str(tmp_path)) == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert run_workloads.commit_label(str(tmp_path)) == head + "-modified"
    monkeypatch.setenv("GPUOS_COMMIT", "abc1234")
    assert run_workloads.commit_label(str(tmp_path)) == "abc1234"
