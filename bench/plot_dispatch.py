"""Plots bench results JSON (dispatch.json) as bars with p10/p90 whiskers."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

doc = json.load(open(sys.argv[1]))
cases = doc["cases"]
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
groups = [[c for c in cases if c["workload"] == "chain100_64x64_f32"],
          [c for c in cases if c["workload"] != "chain100_64x64_f32"]]
titles = ["chain100_64x64_f32 (us per chain of 100 ops)", "dispatch (us per step/task/roundtrip)"]
for ax, group, title in zip(axes, groups, titles):
    labels = [c["variant"] if ax is axes[0] else c["workload"] + "\n" + c["variant"] for c in group]
    med = [c["median_us"] for c in group]
    low = [c["median_us"] - c["p10_us"] for c in group]
    high = [c["p90_us"] - c["median_us"] for c in group]
    ax.bar(range(len(group)), med, yerr=[low, high], capsize=4)
    ax.set_xticks(range(len(group)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
fig.suptitle(f"{doc['device']}, driver {doc['driver']}, CUDA {doc['cuda']}, commit {doc['commit'][:10]}",
             fontsize=9)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
