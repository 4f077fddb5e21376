"""A process that mixes compiled programs run by the persistent worker with
one that runs as tile launches (a diagnostic, not a benchmark): what a
call of attention_small (a one-stage stitched program, docs/pytorch.md
"Tile launches") costs right after a call of mlp_microbatch (run by the
worker, which then stays resident for idle_park), against the same calls
alone.

    python frontends/pytorch/bench/mixed_programs.py --out OUT [--rounds 40]

Timed, in rounds that rotate the scenarios' order, each a block of --block
calls after two untimed ones (median, p10, p90 of all timed calls; host
wall time until PyTorch's current stream's synchronize returns):

  attention_alone        attention call, synchronize; a block begins after
                         a pause longer than idle_park (the worker parked)
  mlp_alone              mlp call, synchronize
  attention_after_mlp    mlp call, synchronize (untimed), then the timed
                         attention call and synchronize: beside a worker that
                         is still resident
  mlp_then_attention     mlp call, attention call, one synchronize (the pair)
  attention_after_routed mlp call, attention call (through the worker, which
                         the mlp call left running), synchronize (untimed),
                         then the timed attention call and synchronize: the
                         grid runs for attention's own run alone, which asks
                         it to park (Runtime::ParkNow) and launches

Run it once per GPUOS_TORCH_TILE_LAUNCH setting (the extension reads it
once a process): the JSON names the setting and counts the tile launches
and submissions made. Outputs are checked against eager once, before the
rounds. Needs a CUDA device; writes <out>/mixed_programs.json (appends a
run to it when it exists).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_events  # noqa: E402
import variants  # noqa: E402
import workloads  # noqa: E402

import gpuos  # noqa: E402

SCENARIOS = ("attention_alone", "mlp_alone", "attention_after_mlp", "mlp_then_attention",
             "attention_after_routed")


def _summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"median_us": pick(0.5), "p10_us": pick(0.1), "p90_us": pick(0.9),
            "calls": len(ordered)}


def _counters(device: torch.device) -> dict:
    """Tile launches, grids launched and grids ParkNow ended (the runtime's),
    submissions (the package's)."""
    stats = gpuos.stats()
    runtime = stats["runtimes"].get(f"cuda:{device.index or 0}", {})
    return {"tile_launches": runtime.get("tile_launches", 0),
            "launches": runtime.get("launches", 0), "early_parks": runtime.get("early_parks", 0),
            "submissions": stats.get("submissions", 0)}


def _check(compiled, module, inputs) -> float:
    got = compiled.call()
    expected = module(*inputs)
    torch.cuda.synchronize()
    if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
        raise SystemExit(f"mixed_programs: {compiled.name} differs from eager "
                         f"(max abs error {(got - expected).abs().max().item():.3g})")
    return (got - expected).abs().max().item()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for the JSON")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of every scenario")
    parser.add_argument("--block", type=int, default=10, help="timed calls per block")
    args = parser.parse_args()
    if args.rounds < 1 or args.block < 1:
        parser.error("--rounds and --block must be at least 1")
    device = trace_events.cuda_device_or_skip(args.out)
    if device is None:
        return 0
    known = {c.name: c for c in workloads.cases()}
    parts = {}
    with torch.no_grad():
        for name in ("mlp_microbatch batch=1", "attention_small seq=32"):
            case = known[name]
            module = workloads.build(case, device)
            inputs = case.make_inputs(device, torch.Generator().manual_seed(0))
            compiled = variants.make("gpuos_compile", module, inputs, device, smoke=False)
            if compiled.call is None:
                print(f"mixed_programs: {name}: {compiled.skipped or compiled.error}",
                      file=sys.stderr)
                return 1
            parts[name.split()[0]] = (compiled, module, inputs)
        errors = {k: _check(*v) for k, v in parts.items()}
        mlp = parts["mlp_microbatch"][0].call
        attention = parts["attention_small"][0].call
        stream = torch.cuda.current_stream(device)
        idle_park_us = float(gpuos.stats()["runtimes"][f"cuda:{device.index or 0}"]
                             ["idle_park_us"])
        pause_s = max(4 * idle_park_us, 1000.0) * 1e-6

        def calls(*functions):
            """A scenario: the calls, then one synchronize, timed into a list
            (None: untimed)."""
            def scenario(timed: list | None) -> None:
                start = time.perf_counter_ns()
                for function in functions:
                    function()
                stream.synchronize()
                if timed is not None:
                    timed.append((time.perf_counter_ns() - start) / 1e3)
            return scenario

        attention_alone = calls(attention)

        def attention_after_mlp(timed: list | None) -> None:
            mlp()
            stream.synchronize()
            attention_alone(timed)

        def attention_after_routed(timed: list | None) -> None:
            mlp()
            attention()
            stream.synchronize()
            attention_alone(timed)

        run = {"attention_alone": attention_alone, "mlp_alone": calls(mlp),
               "attention_after_mlp": attention_after_mlp,
               "mlp_then_attention": calls(mlp, attention),
               "attention_after_routed": attention_after_routed}
        samples = {k: [] for k in SCENARIOS}
        counts = {k: {"tile_launches": 0, "submissions": 0, "launches": 0, "early_parks": 0}
                  for k in SCENARIOS}
        for r in range(args.rounds):
            order = SCENARIOS[r % len(SCENARIOS):] + SCENARIOS[:r % len(SCENARIOS)]
            for name in order:
                time.sleep(pause_s)  # every block starts with the worker parked
                for _ in range(2):
                    run[name](None)
                before = _counters(device)
                for _ in range(args.block):
                    run[name](samples[name])
                after = _counters(device)
                for k in counts[name]:
                    counts[name][k] += after[k] - before[k]
    result = {
        "diagnostic": "mixed_programs",
        "commit": os.environ.get("GPUOS_COMMIT", "unknown"),
        "device": torch.cuda.get_device_name(device),
        "tile_launch_setting": os.environ.get("GPUOS_TORCH_TILE_LAUNCH", "(unset)"),
        "idle_park_us": idle_park_us,
        "rounds": args.rounds, "block": args.block,
        "max_abs_err": errors,
        "scenarios": {k: dict(_summary(samples[k]), **counts[k]) for k in SCENARIOS},
    }
    path = os.path.join(args.out, "mixed_programs.json")
    runs = []
    if os.path.exists(path):
        with open(path) as f:
            runs = json.load(f).get("runs", [])
    runs.append(result)
    with open(path, "w") as f:
        json.dump({"runs": runs}, f, indent=1)
    for k, v in result["scenarios"].items():
        print(f"{result['tile_launch_setting']:>8} {k:22} {v['median_us']:8.1f} us "
              f"(p10 {v['p10_us']:.1f}, p90 {v['p90_us']:.1f}) tile_launches "
              f"{v['tile_launches']} submissions {v['submissions']} launches {v['launches']} "
              f"early_parks {v['early_parks']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
