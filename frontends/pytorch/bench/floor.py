"""The floor of each issue-5 workload (the shared design/benchmarking.md,
"The floor"): what no implementation can beat on the device that ran it.

    bytes    every input and parameter read once, every output written
             once (the least any implementation moves)
    flops    the matrix products' floating-point operations
             (torch.utils.flop_counter; elementwise work is not counted)
    floor    the largest of: bytes over the device's measured copy
             bandwidth (read + write), and the host -> running kernel -> host
             round trip through mapped memory that every call pays

Flops are recorded but not turned into time: no matrix rate of these
devices was measured here, and a floor that leaves a term out is still a
lower bound. The traffic is computed on the CPU from workloads.py's modules
and inputs, so a document's floors can be derived after the fact:

    python frontends/pytorch/bench/floor.py bench/results/pytorch_workloads.json
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
import workloads  # noqa: E402

# Measured on these devices (../shared/design/device-facts.md, benchmarking.md):
# the copy bandwidth (bytes read + written per second) and the round trip (us;
# None where it was not measured).
DEVICE_RATES = {
    "NVIDIA H200": {"copy_bytes_per_s": 4.3e12, "round_trip_us": 2.3},
    "NVIDIA H100 80GB HBM3": {"copy_bytes_per_s": 3.0e12, "round_trip_us": None},
}


def _tensors(value) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def traffic(case: workloads.Case) -> dict:
    """The case's least traffic and its matrix flops (run once on the CPU)."""
    module = workloads.build(case, torch.device("cpu"))
    inputs = case.make_inputs(torch.device("cpu"), torch.Generator().manual_seed(0))
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        outputs = module(*inputs)
    read = _bytes(inputs) + _bytes(list(module.parameters()))
    written = _bytes(_tensors(outputs))
    return {"bytes_read": read, "bytes_written": written, "bytes": read + written,
            "flops": int(counter.get_total_flops())}


def floor_us(moved: dict, device: str) -> Optional[dict]:
    """The floor of a case with traffic `moved` on `device` (a name as
    torch.cuda.get_device_name gives it), or None for a device whose rates
    were not measured: {"floor_us", "bound": "round trip" or "bytes",
    "bytes_us", "round_trip_us"}."""
    rates = DEVICE_RATES.get(device)
    if rates is None:
        return None
    bytes_us = moved["bytes"] / rates["copy_bytes_per_s"] * 1e6
    round_trip = rates["round_trip_us"]
    if round_trip is not None and round_trip >= bytes_us:
        return {"floor_us": round_trip, "bound": "round trip", "bytes_us": bytes_us,
                "round_trip_us": round_trip}
    return {"floor_us": bytes_us, "bound": "bytes", "bytes_us": bytes_us,
            "round_trip_us": round_trip}


def floors(doc: dict) -> list[dict]:
    """Per case of a pytorch_workloads document: its traffic, its floor on the
    document's device, and each measured variant's median over that floor."""
    by_name = {c.name: c for c in workloads.cases()}
    result = []
    for name in dict.fromkeys(r["case"] for r in doc["cases"]):
        case = by_name.get(name)
        if case is None:
            continue
        row = {"case": name, **traffic(case)}
        floor = floor_us(row, doc["device"])
        if floor is not None:
            row.update(floor)
            row["over_floor"] = {
                r["variant"]: round(r["median_us"] / floor["floor_us"], 2)
                for r in doc["cases"]
                if r["case"] == name and report._measured(r) and r.get("correct")}
        result.append(row)
    return result


def table(rows: list[dict], device: str) -> str:
    lines = [f"floors on {device} (bytes over the copy bandwidth, or the round trip):",
             f"{'case':34} {'bytes':>10} {'Mflop':>8} {'floor us':>9} {'bound':>10} "
             f"{'gpuos_compile':>14} {'cuda_graph':>11}"]
    for r in rows:
        if "floor_us" not in r:
            lines.append(f"{r['case']:34} {r['bytes']:10d} {r['flops'] / 1e6:8.2f} "
                         f"{'-':>9} {'(no rates)':>10}")
            continue
        over = r["over_floor"]
        lines.append(f"{r['case']:34} {r['bytes']:10d} {r['flops'] / 1e6:8.2f} "
                     f"{r['floor_us']:9.2f} {r['bound']:>10} "
                     f"{_times(over.get('gpuos_compile')):>14} {_times(over.get('cuda_graph')):>11}")
    return "\n".join(lines)


def _times(ratio: Optional[float]) -> str:
    return "-" if ratio is None else f"{ratio:.1f}x"


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    with open(sys.argv[1]) as f:
        document = json.load(f)
    print(table(floors(document), document["device"]))
