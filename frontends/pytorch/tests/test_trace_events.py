"""bench/trace_events.py's reading of an exported trace, on a synthetic one
(no GPU): the queue breakdown's medians, the completion-to-claim gap and the
blocks that ran each submission's tiles, and the park probe's report of
relaunches."""

import json
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)

import trace_events  # noqa: E402


def _event(cat, name, sequence, ts, dur, block=0, tile=0):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": block,
            "args": {"sequence": sequence, "tile": tile}}


def _submission(sequence, claim, blocks, tile_us=4.0):
    """Admitted at `claim` for 3 us, one 4 us tile on each of `blocks` starting
    2 us after the admission, counted 1 us after the last, stored 1 us later."""
    events = [_event("queue", "admit", sequence, claim, 3.0)]
    first = claim + 5.0
    for i, block in enumerate(blocks):
        events.append(_event("task", "add", sequence, first + 0.5 * i, tile_us, block, i))
    last_end = first + 0.5 * (len(blocks) - 1) + tile_us
    events.append(_event("queue", "complete", sequence, last_end + 1.0, 1.0))
    return events, last_end + 2.0


def test_breakdown_medians_gap_and_blocks(tmp_path):
    events, stored = _submission(1, 0.0, [0, 1, 2, 3])
    more, stored2 = _submission(2, stored + 9.0, [0, 1, 2, 3])
    events += more
    lone, _ = _submission(3, stored2 + 11.0, [50, 50, 50, 50])
    events += lone
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events + [{"ph": "M", "name": "thread_name"}]}))

    got = trace_events.queue_breakdown(str(path), 3)

    assert got["submissions"] == 3
    assert got["admit"] == 3.0
    assert got["to_first_tile"] == 5.0
    assert got["tiles"] == 5.5  # 4 tiles, 0.5 us apart, 4 us each
    assert got["to_count"] == 1.0 and got["complete"] == 1.0
    assert got["claim_gap"] == 10.0  # 9 and 11 us
    assert got["blocks"] == 4 and got["blocks_min"] == 1  # the third ran on block 50 alone


def test_newest_submissions_keeps_only_the_newest(tmp_path):
    events = []
    claim = 0.0
    for sequence in range(1, 6):
        more, claim = _submission(sequence, claim, [0, 1])
        events += more
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))

    tasks = trace_events.newest_submissions(str(path), 2)

    assert sorted(tasks) == [4, 5]
    assert all(len(tiles) == 2 for tiles in tasks.values())


def _grid_tasks(sequence, ts, grid, blocks):
    return [{"ph": "X", "cat": "task", "name": "add", "ts": ts + 0.5 * i, "dur": 4.0,
             "tid": block, "args": {"sequence": sequence, "tile": i, "grid": grid}}
            for i, block in enumerate(blocks)]


def test_relaunch_report_tells_a_park_after_a_long_gap_from_one_inside_a_round():
    # Two rounds of three calls, 300 us each, 50 us apart inside a round and
    # 5 ms between rounds. Grid 1 runs round 0; grid 2 starts round 1 (after
    # the long gap: the park doing its job); grid 3 relaunches inside round 1
    # after a 50 us gap and runs that call on one block.
    calls, submissions = [], {}
    start_ns = 0
    plan = [(0, 0, 1, range(8)), (0, 1, 1, range(8)), (0, 2, 1, range(8)),
            (1, 0, 2, range(8)), (1, 1, 3, [5]), (1, 2, 3, range(8))]
    for sequence, (round_, index, grid, blocks) in enumerate(plan, start=10):
        if index == 0 and round_ > 0:
            start_ns += 5_000_000
        calls.append({"round": round_, "index": index, "start_ns": start_ns,
                      "end_ns": start_ns + 300_000})
        submissions[sequence] = _grid_tasks(sequence, start_ns / 1e3, grid, list(blocks))
        start_ns += 350_000
    submissions[3] = _grid_tasks(3, 0.0, 1, [0])  # older than these calls: left out

    got = trace_events.relaunch_report(calls, submissions, idle_park_us=200.0)

    assert got["calls"] == 6 and got["median_wall_us"] == 300.0
    assert got["new_grids"] == 3
    assert got["new_grids_at_round_start"] == 2  # the first call's grid and grid 2
    assert got["new_grids_inside_rounds"] == 1
    assert got["new_grids_after_short_gap"] == 1
    assert got["gaps_before_new_grids_us"] == [50.0]
    assert got["median_gap_inside_rounds_us"] == 50.0
    assert got["calls_on_few_blocks"] == [{"round": 1, "index": 1, "wall_us": 300.0,
                                           "blocks": 1}]
    assert [r["sequence"] for r in got["rows"]] == list(range(10, 16))
    assert got["rows"][3]["gap_us"] == 5050.0


def test_relaunch_report_needs_every_call_in_the_trace_and_its_grid():
    calls = [{"round": 0, "index": i, "start_ns": i * 1000, "end_ns": i * 1000 + 500}
             for i in range(3)]
    two = {s: _grid_tasks(s, float(s), 1, [0]) for s in (1, 2)}
    with pytest.raises(ValueError, match="GPUOS_TORCH_TRACE"):
        trace_events.relaunch_report(calls, two, 200.0)
    no_grid = {s: _grid_tasks(s, float(s), 1, [0]) for s in (1, 2, 3)}
    for events in no_grid.values():
        del events[0]["args"]["grid"]  # a runtime older than args.grid
    with pytest.raises(ValueError, match="no grid"):
        trace_events.relaunch_report(calls, no_grid, 200.0)
