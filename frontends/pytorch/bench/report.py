"""The issue-5 targets, the speed-up ratios, the printed table and the plot
of a pytorch_workloads document (see run_workloads.py)."""

from __future__ import annotations

from typing import Optional

CHAIN = "chain100_64x64_f32"
# (workload or None for every other workload, variant, baseline, required speed-up)
TARGETS = [
    (CHAIN, "gpuos_compile", "eager", 25.0),
    (CHAIN, "gpuos_compile", "cuda_graph", 3.0),
    (CHAIN, "gpuos_compile", "torch_compile", 1.0),  # "no slower than torch_compile"
    (CHAIN, "gpuos_batching", "eager", 2.0),
    (None, "gpuos_compile", "eager", 3.0),
    (None, "gpuos_compile", "cuda_graph", 1.2),
]
BASELINES = ("eager", "cuda_graph", "torch_compile")


def _measured(row: Optional[dict]) -> bool:
    return row is not None and row.get("median_us") is not None


def add_speedups(rows: list[dict]) -> None:
    """Sets each measured row's speedup_vs: baseline median / its median, for
    the baselines measured in the same case."""
    by_case = {}
    for row in rows:
        by_case.setdefault(row["case"], {})[row["variant"]] = row
    for variants in by_case.values():
        for row in variants.values():
            if not _measured(row):
                continue
            row["speedup_vs"] = {b: variants[b]["median_us"] / row["median_us"]
                                 for b in BASELINES if b != row["variant"] and
                                 _measured(variants.get(b))}


def _why_missing(row: Optional[dict], what: str) -> str:
    if row is None:
        return f"{what}: not run"
    if row.get("error"):
        return f"{what}: failed: {row['error']}"
    if row.get("skipped"):
        return f"{what}: skipped: {row['skipped']}"
    return f"{what}: not correct"


def targets(rows: list[dict]) -> list[dict]:
    """Each issue-5 target per case: measured speed-up and met / not met. A
    target is met only when both variants ran and were correct."""
    by_case: dict[str, dict] = {}
    for row in rows:
        by_case.setdefault(row["case"], {})[row["variant"]] = row
    result = []
    for case, variants in by_case.items():
        workload = next(iter(variants.values()))["workload"]
        for target_workload, variant, baseline, required in TARGETS:
            if (target_workload or workload) != workload or (
                    target_workload is None and workload == CHAIN):
                continue
            entry = {"case": case, "workload": workload, "variant": variant, "vs": baseline,
                     "required_speedup": required, "measured_speedup": None, "met": False}
            ours, theirs = variants.get(variant), variants.get(baseline)
            if not (_measured(ours) and ours.get("correct")):
                entry["why"] = _why_missing(ours, variant)
            elif not (_measured(theirs) and theirs.get("correct")):
                entry["why"] = _why_missing(theirs, baseline)
            else:
                entry["measured_speedup"] = theirs["median_us"] / ours["median_us"]
                entry["met"] = entry["measured_speedup"] >= required
            result.append(entry)
    run = [r for r in rows if _measured(r) or r.get("error")]
    result.append({"target": "every case correct", "met": bool(run) and
                   all(r.get("correct") for r in run) and
                   not any(r.get("skipped") for r in rows),
                   "not_correct": [f"{r['case']} {r['variant']}" for r in run
                                   if not r.get("correct")],
                   "not_run": [f"{r['case']} {r['variant']}" for r in rows if r.get("skipped")]})
    return result


def table(doc: dict) -> str:
    lines = [f"pytorch_workloads: {doc['device']}, torch {doc['torch']}, commit {doc['commit']}"
             f"{' (smoke)' if doc['smoke'] else ''}",
             f"{'case':34} {'variant':17} {'median us':>10} {'p10':>9} {'p90':>9} "
             f"{'x eager':>8} {'correct':>7}  note"]
    for r in doc["cases"]:
        if _measured(r):
            ratio = r.get("speedup_vs", {}).get("eager")
            lines.append(f"{r['case']:34} {r['variant']:17} {r['median_us']:10.1f} "
                         f"{r['p10_us']:9.1f} {r['p90_us']:9.1f} "
                         f"{'' if ratio is None else f'{ratio:.2f}':>8} {str(r['correct']):>7}  "
                         f"{'' if r['correct'] else 'max_abs_err ' + str(r.get('max_abs_err'))}")
        else:
            note = r.get("error") or r.get("skipped") or ""
            lines.append(f"{r['case']:34} {r['variant']:17} {'-':>10} {'-':>9} {'-':>9} "
                         f"{'':>8} {'-':>7}  {note[:100]}")
    lines.append("targets:")
    for t in doc["targets"]:
        if "target" in t:
            lines.append(f"  {t['target']}: {'met' if t['met'] else 'NOT MET'}")
            continue
        measured = ("-" if t["measured_speedup"] is None else f"{t['measured_speedup']:.2f}x")
        lines.append(f"  {t['case']:34} {t['variant']} vs {t['vs']}: >= {t['required_speedup']}x, "
                     f"measured {measured}: {'met' if t['met'] else 'NOT MET'}"
                     f"{'' if 'why' not in t else ' (' + t['why'][:80] + ')'}")
    return "\n".join(lines)


def plot(doc: dict, path: str) -> Optional[str]:
    """Writes the plot; returns why not when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        return f"plot skipped: {error}"
    rows = [r for r in doc["cases"] if _measured(r)]
    cases = list(dict.fromkeys(r["case"] for r in doc["cases"]))
    variants = list(dict.fromkeys(r["variant"] for r in doc["cases"]))
    width = 0.8 / max(1, len(variants))
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(cases)), 4.5))
    for j, variant in enumerate(variants):
        xs, med, low, high = [], [], [], []
        for i, case in enumerate(cases):
            row = next((r for r in rows if r["case"] == case and r["variant"] == variant), None)
            if row is not None:
                xs.append(i + (j - (len(variants) - 1) / 2) * width)
                med.append(row["median_us"])
                low.append(row["median_us"] - row["p10_us"])
                high.append(row["p90_us"] - row["median_us"])
        if xs:
            ax.bar(xs, med, width, yerr=[low, high], capsize=2, label=variant)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([c.replace(" ", "\n") for c in cases], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("us per call (median, p10/p90)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"{doc['device']}, torch {doc['torch']}, CUDA {doc.get('cuda')}, "
                 f"commit {str(doc['commit'])[:10]}{' (smoke)' if doc['smoke'] else ''}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


if __name__ == "__main__":  # re-plot a result: python report.py JSON PNG
    import json
    import sys

    with open(sys.argv[1]) as f:
        document = json.load(f)
    print(plot(document, sys.argv[2]) or table(document))
