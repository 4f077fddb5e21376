"""bench/trace_events.py's reading of an exported trace, on a synthetic one
(no GPU): the queue breakdown's medians, the completion-to-claim gap and the
blocks that ran each submission's tiles."""

import json
import os
import sys

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
