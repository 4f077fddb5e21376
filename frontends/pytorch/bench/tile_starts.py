"""When each tile of a direct submission started, relative to its opening (a
diagnostic, no GPU needed): reads the Chrome trace that stitch_profile.py
exports (gpuos.export_trace, tracing on) and prints, over the newest
--count submissions, the median start of the k-th tile to start after the
admit record's end (the opening of the claim word, docs/runtime.md "Direct
tiles"), the admitting block's first tile, the blocks whose first tile
started latest, and the median from the last tile's end to the complete
record. Session 31 found this way that the poller that did not claim a
submission started its tile 0.8-1.2 us after every other helper. Where the
trace has helpers' "help" records (since session 43: a block began to help
at the record's start and saw the opening at its end), it also prints the
median over submissions of each one's first, median and last helper start
after the claim (the admit record's start, when the board was posted) and the
median from the opening to a helper seeing it. (With a worker built with
GPUOS_TRACE_IDLE_ROUNDS=N a help record starts earlier on the helper's way:
1 the idle round that found the board, 2 its sighting, 3 past the worker's
barriers, 4 HelpRunDirect's first instruction: docs/runtime.md, "Chrome
trace".)

    python frontends/pytorch/bench/tile_starts.py TRACE.json [...] [--count 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict


# A help record at least this long (us) is a helper that gave up waiting for
# the opening (queue_direct.cuh, kDirectOpenWaitNs: 50 us).
HELP_WAIT_GAVE_UP_US = 45.0


def tile_starts(events: list, count: int) -> dict:
    """The summary of the newest `count` submissions of `events` (the trace's
    "X" events: category "queue" admit, complete and help records and "task"
    tile records, each with args.sequence; tid is the worker block)."""
    events = [e for e in events if e.get("ph") == "X"]
    newest = set(sorted({e["args"]["sequence"] for e in events})[-count:])
    admit, complete, tiles, helps = {}, {}, defaultdict(list), defaultdict(list)
    for e in events:
        sequence = e["args"]["sequence"]
        if sequence not in newest:
            continue
        if e.get("cat") == "queue" and e["name"] == "help":
            helps[sequence].append(e)
        elif e.get("cat") == "queue":
            (admit if e["name"] == "admit" else complete)[sequence] = e
        elif e.get("cat") == "task":
            tiles[sequence].append(e)
    ranks, admitter, per_block, to_complete = defaultdict(list), [], defaultdict(list), []
    help_starts, sees_opening = defaultdict(list), []
    used = 0
    for sequence, records in tiles.items():
        if sequence not in admit:
            continue
        used += 1
        a = admit[sequence]
        opening = a["ts"] + a["dur"]
        offsets = sorted(t["ts"] - opening for t in records)
        n = len(offsets)
        for k in sorted({0, 1, n // 4, n // 2, 3 * n // 4, n - 2, n - 1}):
            if 0 <= k < n:
                ranks[k].append(offsets[k])
        first = {}
        for t in records:
            first[t["tid"]] = min(first.get(t["tid"], t["ts"]), t["ts"])
        for block, start in first.items():
            (admitter if block == a["tid"] else per_block[block]).append(start - opening)
        if sequence in complete:
            to_complete.append(complete[sequence]["ts"] - max(t["ts"] + t["dur"] for t in records))
        # A helper that gave up waiting (its record lasts the wait's 50 us
        # limit) is left out: it saw no opening.
        seen = [h for h in helps.get(sequence, []) if h["dur"] < HELP_WAIT_GAVE_UP_US]
        starts = sorted(h["ts"] - a["ts"] for h in seen)
        if starts:
            help_starts["first"].append(starts[0])
            help_starts["median"].append(starts[len(starts) // 2])
            help_starts["last"].append(starts[-1])
        sees_opening.extend(h["ts"] + h["dur"] - opening for h in seen)
    med = statistics.median
    late = sorted(((med(v), b) for b, v in per_block.items()), reverse=True)[:8]
    return {"submissions": used,
            "start_by_rank_us": {k: med(v) for k, v in sorted(ranks.items())},
            "admitter_first_us": med(admitter) if admitter else None,
            "latest_helpers": [{"block": b, "first_start_us": m} for m, b in late],
            "last_end_to_complete_us": med(to_complete) if to_complete else None,
            "help_start_us": {k: med(help_starts[k]) for k in ("first", "median", "last")
                              if help_starts[k]},
            "help_sees_opening_us": med(sees_opening) if sees_opening else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+", help="trace JSON files (stitch_profile.py's)")
    parser.add_argument("--count", type=int, default=300, help="newest submissions to read")
    args = parser.parse_args(argv)
    for path in args.traces:
        with open(path) as f:
            summary = tile_starts(json.load(f)["traceEvents"], args.count)
        print(f"{path}: {summary['submissions']} submissions")
        print("  tile start (rank: median us after the opening): " +
              ", ".join(f"{k}:{v:.2f}" for k, v in summary["start_by_rank_us"].items()))
        if summary["admitter_first_us"] is not None:
            print(f"  admitting block's first tile: {summary['admitter_first_us']:.2f} us")
        print("  latest helpers (block: median first start): " +
              ", ".join(f"{h['block']}: {h['first_start_us']:.2f}" for h in summary["latest_helpers"]))
        if summary["last_end_to_complete_us"] is not None:
            print(f"  last tile end -> complete record: {summary['last_end_to_complete_us']:.2f} us")
        if summary["help_start_us"]:
            print("  helper began (each call's first, median, last: median us after the claim): " +
                  ", ".join(f"{k}:{v:.2f}" for k, v in summary["help_start_us"].items()))
            print(f"  helper saw the opening: {summary['help_sees_opening_us']:.2f} us after it"
                  " (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
