#!/usr/bin/env python3
"""Plots bench live_update.json: median and p99 per case (log scale), targets dashed."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TARGETS_US = {"epoch_switch": 500.0, "alias_rollback": 20.0}


def main(source, target):
    with open(source) as f:
        doc = json.load(f)
    cases = doc["cases"]
    labels = [f'{c["workload"]}\n{c["variant"]}' for c in cases]
    medians = [c["median_us"] for c in cases]
    p99 = [c.get("p99_us", c["median_us"]) for c in cases]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = range(len(cases))
    ax.bar([x - 0.2 for x in xs], medians, width=0.4, label="median")
    ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99")
    for x, c in zip(xs, cases):
        goal = TARGETS_US.get(c["workload"])
        if goal:
            ax.hlines(goal, x - 0.45, x + 0.45, colors="red", linestyles="dashed")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("microseconds (log)")
    ax.set_title(f'gpuos live updates ({doc.get("commit", "")}); red dashes: targets')
    ax.legend()
    fig.tight_layout()
    fig.savefig(target, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
