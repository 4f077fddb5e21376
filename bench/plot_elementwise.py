"""Plots elementwise_large.json: GB/s per variant (p10/p90 whiskers), copy ceiling line."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

doc = json.load(open(sys.argv[1]))
cases = doc["cases"]
# The result first (copy, gpuos), then the diagnostics.
cases.sort(key=lambda c: (c["diagnostic"], c["variant"] != "copy_ceiling", c["variant"]))
fig, ax = plt.subplots(figsize=(10, 4))
gbps = [c["gbps"] for c in cases]
# Bandwidth is bytes / time: the p90 time gives the low whisker, p10 the high one.
low = [c["gbps"] - c["bytes_moved"] / c["p90_us"] / 1e3 for c in cases]
high = [c["bytes_moved"] / c["p10_us"] / 1e3 - c["gbps"] for c in cases]
colors = ["tab:gray" if c["variant"] == "copy_ceiling" else
          "tab:blue" if not c["diagnostic"] else "tab:orange" for c in cases]
ax.bar(range(len(cases)), gbps, yerr=[low, high], capsize=4, color=colors)
copy = next(c["gbps"] for c in cases if c["variant"] == "copy_ceiling")
ax.axhline(0.85 * copy, color="tab:red", linestyle="--", linewidth=1, label="target: 85% of copy")
ax.set_xticks(range(len(cases)))
ax.set_xticklabels([c["variant"] + ("\n(diagnostic)" if c["diagnostic"] else "") for c in cases],
                   fontsize=7)
ax.set_ylabel("GB/s (bytes read + written / median time)")
ax.legend(fontsize=8)
ax.set_title(f"elementwise_large_f32: add f32, {doc['elements']} elements; "
             f"gpuos / copy = {doc['ratios']['gpuos_over_copy_bandwidth']:.2f}", fontsize=9)
fig.suptitle(f"{doc['device']}, driver {doc['driver']}, CUDA {doc['cuda']}, "
             f"commit {doc['commit'][:10]}", fontsize=9)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
