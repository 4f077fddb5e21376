"""tools/ab-profile.sh's plan and argument checks on the CPU (--dry-run
builds nothing and runs no GPU code): the runs alternate variants within a
round, each variant's defines reach its runs, and bad arguments are refused
with exit status 2 and a message."""

import os
import re
import shlex
import subprocess

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
