#!/usr/bin/env python3
"""Plots bus bandwidth against message size from gradwire-perf --json files.

    benchmarks/plot.py results/allreduce.json [more.json ...] -o busbw.png

One line per (implementation, collective, provider); rows an
implementation could not run (available: false) are skipped.
"""
import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", help="JSON files written by gradwire-perf --json")
    ap.add_argument("-o", "--output", default="busbw.png", help="PNG to write")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    lines = defaultdict(list)
    memory = None
    for path in args.inputs:
        with open(path) as f:
            doc = json.load(f)
        memory = memory or doc.get("memory")
        for row in doc["rows"]:
            if not row.get("available", True) or row["time_us"] <= 0:
                continue
            key = f'{row["impl"]} {row["coll"]} ({row["provider"]}, {row["ranks"]} ranks)'
            lines[key].append((row["bytes"], row["busbw_gbs"]))
    if not lines:
        print("plot.py: no rows to plot", file=sys.stderr)
        return 1

    fig, ax = plt.subplots(figsize=(8, 5))
    for key in sorted(lines):
        pts = sorted(lines[key])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=key)
    if memory:
        ax.axhline(memory["memcpy_gbs"], color="grey", linestyle="--", linewidth=0.8,
                   label=f'one-core memcpy ({memory["memcpy_gbs"]:.1f} GB/s)')
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(args.title or "bus bandwidth (nccl-tests definition)")
    ax.grid(True, which="both", linewidth=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"plot.py: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
