"""Per-op cost of intercepting aten ops, on the CPU (not a test; not GPU
numbers): a chain of 100 elementwise ops on small CPU tensors, run

    eager          plain PyTorch
    batching       inside gpuos.batching(): the C++ fallback counts the op by
                   name and redispatches to the kernel below its key
    python_mode    inside a Python TorchDispatchMode that counts the op by
                   name and calls it (what interception in Python costs)

and prints the median time per op of each and the overhead over eager.

    python frontends/pytorch/bench/batching_overhead.py [--size 8] [--repeats 200] [--json]

The intercept cost is what batching adds to every op on any device; on a GPU
the kernel launch it replaces is several microseconds (device-facts.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import gpuos

CHAIN_OPS = 100


def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    for i in range(CHAIN_OPS // 4):  # 4 ops per step
        x = torch.relu(x * y + 1.0) - 0.5 if i % 2 else torch.sigmoid(x + y) * 0.9 - y
    return x


class CountingMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.name()] += 1
        return func(*args, **(kwargs or {}))


def per_op_us(run, repeats: int) -> float:
    for _ in range(10):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / CHAIN_OPS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=8, help="square tensors of this side")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(args.size, args.size)
    y = torch.randn(args.size, args.size)
    expected = chain(x, y)

    def batched():
        with gpuos.batching():
            return chain(x, y)

    mode = CountingMode()

    def python_mode():
        with mode:
            return chain(x, y)

    gpuos.reset_batching_stats()
    assert torch.equal(batched(), expected) and torch.equal(python_mode(), expected)
    seen = sum(gpuos.batching_stats()["ops"].values())
    if seen != CHAIN_OPS or sum(mode.counts.values()) != CHAIN_OPS:
        raise SystemExit(f"expected {CHAIN_OPS} ops per chain, batching saw {seen}, "
                         f"the Python mode {sum(mode.counts.values())}")
    result = {"device": "cpu", "torch": torch.__version__, "tensor": [args.size, args.size],
              "ops_per_chain": CHAIN_OPS, "repeats": args.repeats}
    # Interleaved rounds, so drift of the machine affects every variant alike.
    rounds = {"eager": [], "batching": [], "python_mode": []}
    for _ in range(3):
        rounds["eager"].append(per_op_us(lambda: chain(x, y), args.repeats))
        rounds["batching"].append(per_op_us(batched, args.repeats))
        rounds["python_mode"].append(per_op_us(python_mode, args.repeats))
    us = {name: min(values) for name, values in rounds.items()}
    result["per_op_us"] = {name: round(value, 3) for name, value in us.items()}
    result["overhead_us_per_op"] = {name: round(us[name] - us["eager"], 3)
                                    for name in ("batching", "python_mode")}
    if args.json:
        print(json.dumps(result))
        return
    print(f"CPU, torch {torch.__version__}, {CHAIN_OPS}-op chain on {args.size}x{args.size} f32, "
          f"median of {args.repeats} chains, best of 3 rounds (not GPU numbers)")
    for name, value in us.items():
        extra = "" if name == "eager" else f"  (+{value - us['eager']:.2f} us/op over eager)"
        print(f"  {name:12s} {value:7.2f} us/op{extra}")


if __name__ == "__main__":
    main()
