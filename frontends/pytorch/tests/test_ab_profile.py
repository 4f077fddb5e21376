"""tools/ab-profile.sh's plan and argument checks on the CPU (--dry-run
builds nothing and runs no GPU code): the runs alternate variants within a
round, each variant's defines reach its runs, and bad arguments are refused
with exit status 2 and a message."""

import json
import os
import re
import shlex
import subprocess
import tarfile

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                      "ab-profile.sh")


def _run(*args):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=30)


def test_plan_alternates_variants_in_each_round_then_phase_timing():
    done = _run("--dry-run", "--rounds", "2", "--calls", "50", "--case", "attention_small seq=128",
                "--case", "attention_small seq=32", "--phase", "new=",
                "old=GPUOS_STITCH_KEYS_BLOCKED GPUOS_STITCH_Q_UNPADDED")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    runs = [re.match(r"(round \d+|phase): (\S+) \(", line) for line in lines]
    assert [f"{m.group(1)} {m.group(2)}" for m in runs] == [
        "round 1 new", "round 1 old", "round 2 new", "round 2 old", "phase new", "phase old"]
    # The arguments as the runs get them (the plan quotes them for a shell).
    first = shlex.split(lines[0].split("): ", 1)[1])
    assert first == ["stitch_profile.py", "--calls", "50", "--case", "attention_small seq=128",
                     "--case", "attention_small seq=32"]
    old = lines[1].split("GPUOS_JIT_DEFINES=", 1)[1].split("): ", 1)[0]
    assert shlex.split(old) == ["GPUOS_STITCH_KEYS_BLOCKED GPUOS_STITCH_Q_UNPADDED"]
    assert shlex.split(lines[4].split("): ", 1)[1]) == [
        "phase_timing.py", "--case", "attention_small seq=128"]


def test_defaults_are_two_rounds_of_300_calls_over_every_workload():
    done = _run("--dry-run", "a=", "b=X")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4
    assert all(line.endswith("stitch_profile.py --calls 300") for line in lines)


@pytest.mark.parametrize("args, message", [
    (["a="], "at least two variants"),
    (["a=", "a=X"], "variant 'a' given twice"),
    (["x y=", "b="], "letters, digits, _ and - only"),
    (["--rounds", "0", "a=", "b="], "--rounds wants a positive whole number"),
    (["--calls", "many", "a=", "b="], "--calls wants a positive whole number"),
    (["--calls"], "--calls wants a positive whole number"),
    (["--case", "", "a=", "b="], "--case wants a case name"),
    (["--bogus", "a=", "b="], "unknown option --bogus"),
    (["stray", "a=", "b="], "'stray' is neither an option nor NAME=DEFINES"),
    (["a=", "b=X env:1x"], "'env:1x' (in 'b=X env:1x'): env: takes VAR=VALUE"),
])
def test_bad_arguments_are_refused_before_anything_is_built(args, message):
    done = _run("--dry-run", *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "usage: ab-profile.sh" in done.stderr
    assert done.stdout == ""


def test_help_prints_the_header():
    done = _run("--help")
    assert done.returncode == 0
    assert "NAME=DEFINES" in done.stdout and "GPUOS_AB_TIMEOUT_S" in done.stdout


_FAKE_PYTHON = r"""#!/bin/sh
# pip installs nothing; a bench script writes its result, a trace beside it
# (as stitch_profile.py does) and a summary line, and fails for FAIL.
case "$2" in pip) exit 0;; esac
case "$1" in
  *stitch_profile.py|*phase_timing.py)
    out="$3"; mkdir -p "$out"; name=$(basename "$1" .py)
    printf '{"defines": "%s", "cache": "%s", "args": "%s", "open_later": "%s"}' \
      "$GPUOS_JIT_DEFINES" "$GPUOS_TORCH_CACHE" "$*" "${GPUOS_TORCH_OPEN_LATER-unset}" \
      > "$out/$name.json"
    # One submission: its admit record ends at 1 us, its tiles start at 2
    # (the admitting block, tid 0) and 3 (a helper, tid 5).
    printf '{"traceEvents": [%s, %s, %s]}' \
      '{"ph": "X", "cat": "queue", "name": "admit", "ts": 0, "dur": 1, "tid": 0, "args": {"sequence": 1}}' \
      '{"ph": "X", "cat": "task", "name": "t", "ts": 2, "dur": 1, "tid": 0, "args": {"sequence": 1}}' \
      '{"ph": "X", "cat": "task", "name": "t", "ts": 3, "dur": 1, "tid": 5, "args": {"sequence": 1}}' \
      > "$out/trace_case.json"
    echo "case: wall 1.0 us"
    case "$GPUOS_JIT_DEFINES" in *FAIL*) exit 3;; esac;;
  *tile_starts.py) exec python3 "$@";;  # the real one, over the trace above
esac
exit 0
"""


def _fake_tools(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "python").write_text(_FAKE_PYTHON)
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    out = tmp_path / "out"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHON=str(bin_dir / "python"),
               OUT=str(out), GPUOS_BUILD_DIR=str(tmp_path / "build"),
               GPUOS_DEPS_DIR=str(tmp_path / "deps"))  # none: nothing unpacked
    env.pop("GPUOS_TORCH_OPEN_LATER", None)
    return out, env


def test_plan_shows_env_words_apart_from_the_defines_unglobbed(tmp_path):
    (tmp_path / "Yes").write_text("")  # a file a glob of Y* would match
    done = subprocess.run(["bash", SCRIPT, "--dry-run", "--rounds", "1", "a=",
                           "b=X env:GPUOS_TORCH_OPEN_LATER=0 Y*"],
                          capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = done.stdout.splitlines()[1]
    assert line.startswith("round 1: b (GPUOS_JIT_DEFINES=")
    defines, env = line.split("GPUOS_JIT_DEFINES=", 1)[1].split("): ", 1)[0].split("; env ")
    assert shlex.split(defines) == ["X Y*"] and env == "GPUOS_TORCH_OPEN_LATER=0"


def test_env_words_set_the_variants_environment_not_its_defines(tmp_path):
    out, env = _fake_tools(tmp_path)
    done = subprocess.run(["bash", SCRIPT, "--rounds", "1", "a=",
                           "b=X env:GPUOS_TORCH_OPEN_LATER=0 Y"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(out / "ab_profile.tgz") as tar:
        a = json.load(tar.extractfile("keep/a@round1.json"))
        b = json.load(tar.extractfile("keep/b@round1.json"))
    assert (a["defines"], a["open_later"]) == ("", "unset")
    assert (b["defines"], b["open_later"]) == ("X Y", "0")
    log = (out / "ab_profile.log").read_text()
    assert "== b@round1 (GPUOS_JIT_DEFINES='X Y'; env GPUOS_TORCH_OPEN_LATER=0)" in log


def test_runs_keep_each_variants_result_and_report_a_failed_one(tmp_path):
    # The build and the bench scripts replaced by stand-ins (no GPU here):
    # what is checked is the script's own part, the runs' order, defines,
    # caches, records and exit status.
    out, env = _fake_tools(tmp_path)
    done = subprocess.run(["bash", SCRIPT, "--rounds", "2", "--calls", "7", "--phase",
                           "--case", "attention_small seq=32", "a=", "b=X FAIL"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1, done.stdout + done.stderr  # b's runs failed
    assert "FAILED (exit 3)" in done.stdout
    assert not (out / "deps.log").exists()
    with tarfile.open(out / "ab_profile.tgz") as tar:
        names = sorted(n for n in tar.getnames() if n.endswith(".json"))
        assert names == ["keep/a@phase.json", "keep/a@round1.json", "keep/a@round2.json",
                         "keep/b@phase.json", "keep/b@round1.json", "keep/b@round2.json"]
        results = {n: json.load(tar.extractfile(n)) for n in names}
    assert results["keep/b@round2.json"]["defines"] == "X FAIL"
    assert results["keep/a@round1.json"]["defines"] == ""
    assert "--calls 7 --case attention_small seq=32" in results["keep/a@round1.json"]["args"]
    caches = {n: os.path.basename(r["cache"]) for n, r in results.items()}
    assert caches["keep/a@round1.json"] == caches["keep/a@round2.json"] == "cache_a.db"
    assert caches["keep/a@phase.json"] == "cache_a@phase.db"  # no variant name has an @
    assert caches["keep/b@round1.json"] == "cache_b.db"
    log = (out / "ab_profile.log").read_text()
    assert [line for line in log.splitlines() if line.startswith("== ")] == [
        "== a@round1 (GPUOS_JIT_DEFINES='')", "== b@round1 (GPUOS_JIT_DEFINES='X FAIL')",
        "== a@round2 (GPUOS_JIT_DEFINES='')", "== b@round2 (GPUOS_JIT_DEFINES='X FAIL')",
        "== a@phase (GPUOS_JIT_DEFINES='')", "== b@phase (GPUOS_JIT_DEFINES='X FAIL')"]


def test_tile_starts_reads_each_profile_runs_traces_and_not_the_phase_runs(tmp_path):
    out, env = _fake_tools(tmp_path)
    done = subprocess.run(["bash", SCRIPT, "--rounds", "1", "--calls", "7", "--phase",
                           "--tile-starts", "a=", "b=X"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (out / "ab_profile.log").read_text()
    runs = log.split("== ")[1:]
    assert [run.split(" ", 1)[0] for run in runs] == ["a@round1", "b@round1", "a@phase",
                                                      "b@phase"]
    for run in runs[:2]:  # tile_starts.py's summary of the stand-in trace, indented
        assert "   tile starts, trace_case.json:" in run
        assert "1 submissions" in run
        assert "tile start (rank: median us after the opening): 0:1.00, 1:2.00" in run
        assert "admitting block's first tile: 1.00 us" in run
        assert "latest helpers (block: median first start): 5: 2.00" in run
    for run in runs[2:]:
        assert "tile starts" not in run
    with tarfile.open(out / "ab_profile.tgz") as tar:
        kept = tar.extractfile("keep/a@round1.log").read().decode()
    assert "admitting block's first tile: 1.00 us" in kept
