#!/usr/bin/env python3
"""Draws the plots of BENCHMARKS.md from the CSV files beside them.

    python3 tools/plot_benchmarks.py [FIGURES_DIR]     (default: docs/figures)

A developer tool, not part of the library or its tests: it needs matplotlib
(`pip install matplotlib`, or `pip install -r benchmarks/requirements.txt`),
which nothing else in the build requires. It measures nothing. Each CSV in
FIGURES_DIR holds figures copied from BENCHMARKS.md's tables, with the date,
commit, machine and command of the run in its leading `#` lines; this script
redraws every PNG from them, so a new measurement is a change to a CSV (and
to BENCHMARKS.md's table) followed by a rerun of this script.

The PNGs it writes, one per CSV:
  busbw_one_host.png        busbw against size, gradwire against Open MPI
  busbw_one_host_gloo.png   the same with Gloo (the one run that has it)
  latency_one_host.png      time per small collective against size, both VM states
  busbw_across_hosts.png    busbw across two emulated hosts, with iperf3's line
  latency_across_hosts.png  time per small allreduce across two emulated hosts
  elastic_recovery.png      kill to next step: elastic against a torchrun restart

Sizes span decades, so every size axis is logarithmic (base 2); times that
span decades are too.
"""

from __future__ import annotations

import csv
import os
import sys
from collections import defaultdict

try:
    import matplotlib
except ImportError:
    sys.exit("plot_benchmarks.py: needs matplotlib (pip install matplotlib)")
matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

GRADWIRE = "tab:blue"
MPI = "tab:orange"
GLOO = "tab:green"


def read_csv(path: str) -> list[dict[str, str]]:
    """Rows of a CSV whose leading lines may be `#` comments (its source)."""
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines))


def size_label(n: float, _pos=None) -> str:
    n = int(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def size_axis(ax, title: str) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.set_xlabel("message size")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", linewidth=0.3)
    for label in ax.get_xticklabels():
        label.set_rotation(30)


def log_y(ax, label: str) -> None:
    """A logarithmic y axis with plain numbers (0.2, 1, 10), not 2 x 10^-1."""
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(FuncFormatter(
        lambda v, _pos: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
    ax.set_ylabel(label)


def save(fig, out_dir: str, name: str, suptitle: str) -> None:
    fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot_benchmarks.py: wrote {path}")


def busbw_one_host(d: str) -> None:
    rows = read_csv(os.path.join(d, "busbw_one_host.csv"))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for ax, coll in zip(axes, ("allreduce", "reduce_scatter", "allgather")):
        for ranks, style in (("2", "-"), ("3", "--")):
            sel = [r for r in rows if r["collective"] == coll and r["ranks"] == ranks]
            x = [int(r["bytes"]) for r in sel]
            ax.plot(x, [float(r["gradwire_gbs"]) for r in sel], style, marker="o", ms=3,
                    color=GRADWIRE, label=f"gradwire, {ranks} ranks")
            ax.plot(x, [float(r["openmpi_gbs"]) for r in sel], style, marker="s", ms=3,
                    color=MPI, label=f"Open MPI, {ranks} ranks")
        size_axis(ax, coll)
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=8)
    save(fig, d, "busbw_one_host.png",
         "One host, ordinary buffers, shm, float32 sum "
         "(2026-11-28, 3aa43c2, 2-core VM; benchmarks/bandwidth)")


def busbw_of(row: dict[str, str], coll: str) -> float:
    """The recorded busbw, or below 0.1 GB/s (3 decimals round it towards 0)
    the one the recorded time gives: allreduce S/t, reduce-scatter and
    allgather S/(2t) at 2 ranks (nccl-tests' factors)."""
    recorded = float(row["busbw_gbs"])
    if recorded >= 0.1:
        return recorded
    factor = 1.0 if coll == "allreduce" else 0.5
    return int(row["bytes"]) * factor / (float(row["time_us"]) * 1e3)


def busbw_one_host_gloo(d: str) -> None:
    rows = read_csv(os.path.join(d, "busbw_one_host_gloo.csv"))
    impls = (("gradwire direct (shared buffers)", GRADWIRE, "-"),
             ("Open MPI (same shared buffers)", MPI, "-"),
             ("Open MPI (ordinary buffers)", MPI, ":"),
             ("Gloo", GLOO, "-"))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for ax, coll in zip(axes, ("allreduce", "reduce_scatter", "allgather")):
        for impl, color, style in impls:
            sel = sorted((int(r["bytes"]), busbw_of(r, coll)) for r in rows
                         if r["collective"] == coll and r["impl"] == impl)
            ax.plot([b for b, _ in sel], [g for _, g in sel], style,
                    marker="o", ms=3, color=color, label=impl)
        size_axis(ax, f"{coll}, 2 ranks")
        log_y(ax, "bus bandwidth (GB/s, log)")
    axes[0].legend(fontsize=7)
    save(fig, d, "busbw_one_host_gloo.png",
         "One host against Gloo (torch.distributed) and Open MPI "
         "(2026-11-22, 83a0fc7, 2-core VM; benchmarks/compare)")


def latency_one_host(d: str) -> None:
    rows = read_csv(os.path.join(d, "latency_one_host.csv"))
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, op in zip(axes.flat, ("allreduce", "reduce_scatter", "allgather", "broadcast")):
        for state, style in (("fast", "-"), ("slow", "--")):
            sel = [r for r in rows if r["operation"] == op and r["ranks"] == "2"
                   and r["state"] == state]
            x = [int(r["bytes"]) for r in sel]
            ax.plot(x, [float(r["gradwire_us"]) for r in sel], style, marker="o", ms=3,
                    color=GRADWIRE, label=f"gradwire, {state} state")
            ax.plot(x, [float(r["openmpi_us"]) for r in sel], style, marker="s", ms=3,
                    color=MPI, label=f"Open MPI, {state} state")
        note = " (the slow-state run fell in a fast spell)" if op == "allgather" else ""
        size_axis(ax, f"{op}, 2 ranks{note}")
        log_y(ax, "time per call (us, log)")
    axes[0][0].legend(fontsize=8)
    save(fig, d, "latency_one_host.png",
         "Small collectives on one host, ordinary buffers, median of 3 runs "
         "(2026-11-28, d4dc763, 2-core VM; REPS=3 benchmarks/latency)")


# The two links of BENCHMARKS.md's cross-host section, one panel each.
LINKS = (("1gbit", "tc-shaped 1 Gbit/s link (2026-11-26, ede77f2)"),
         ("none", "unshaped veth, 20 iterations (2026-11-27, 5c26469)"))


def across_hosts(d: str, name: str, series, finish, suptitle: str) -> None:
    """One panel per link of CSV `name`: a line per (column, label, colour,
    style) of `series`; `finish(ax, rows)` labels the y axis."""
    rows = read_csv(os.path.join(d, name + ".csv"))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    for ax, (link, title) in zip(axes, LINKS):
        sel = [r for r in rows if r["link"] == link]
        x = [int(r["bytes"]) for r in sel]
        for col, label, color, style in series:
            ax.plot(x, [float(r[col]) for r in sel], style, marker="o", ms=3, color=color,
                    label=label)
        size_axis(ax, title)
        finish(ax, sel)
        ax.legend(fontsize=7)
    save(fig, d, name + ".png", suptitle)


def busbw_across_hosts(d: str) -> None:
    def finish(ax, sel):
        iperf3 = float(sel[0]["iperf3_mbs"])
        ax.axhline(iperf3, color="grey", linestyle="--", linewidth=1,
                   label=f"iperf3, one stream ({iperf3:.0f} MB/s)")
        ax.set_ylabel("allreduce bus bandwidth (MB/s)")
        ax.set_ylim(bottom=0)

    across_hosts(d, "busbw_across_hosts",
                 (("net_mbs", "gradwire, net", GRADWIRE, "-"),
                  ("sockets_mbs", "gradwire, sockets", GRADWIRE, ":"),
                  ("tcp_ofi_rxm_mbs", "gradwire, tcp;ofi_rxm", GRADWIRE, "--"),
                  ("gloo_mbs", "Gloo", GLOO, "-"),
                  ("openmpi_mbs", "Open MPI", MPI, "-")),
                 finish,
                 "Allreduce across two emulated hosts, 1 rank each, float32 "
                 "(2-core VM; benchmarks/network-compare)")


def latency_across_hosts(d: str) -> None:
    across_hosts(d, "latency_across_hosts",
                 (("net_us", "gradwire, net", GRADWIRE, "-"),
                  ("tcp_ofi_rxm_us", "gradwire, tcp;ofi_rxm", GRADWIRE, "--"),
                  ("gloo_us", "Gloo", GLOO, "-"),
                  ("openmpi_us", "Open MPI", MPI, "-")),
                 lambda ax, _sel: log_y(ax, "time per allreduce (us, log)"),
                 "Small allreduces across two emulated hosts, 1 rank each "
                 "(2-core VM; benchmarks/network-compare; latency 200 iterations)")


def elastic_recovery(d: str) -> None:
    rows = read_csv(os.path.join(d, "elastic_recovery.csv"))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4),
                                      gridspec_kw={"width_ratios": [1, 1.3]})
    fixed = defaultdict(dict)
    for r in rows:
        if r["series"].endswith("fixed kills"):
            fixed[int(r["kill_after_step"])][r["series"]] = r
    steps = sorted(fixed)
    width = 0.38
    for i, (series, color) in enumerate((("elastic (C++), fixed kills", GRADWIRE),
                                         ("torchrun restart, fixed kills", "tab:red"))):
        xs = [k + (i - 0.5) * width for k in range(len(steps))]
        ms = [float(fixed[s][series]["kill_to_next_step_ms"]) for s in steps]
        bars = left.bar(xs, ms, width, color=color,
                        label=series.replace(", fixed kills", "")
                        .replace("elastic (C++)", "in-process recovery (elastic)"))
        for bar, s in zip(bars, steps):
            redone = fixed[s][series]["steps_redone"]
            left.annotate(f"{redone} redone", (bar.get_x() + bar.get_width() / 2,
                                               bar.get_height()),
                          ha="center", va="bottom", fontsize=7)
    left.set_xticks(range(len(steps)), [f"kill after step {s}" for s in steps])
    left.set_ylabel("kill to next completed step (ms)")
    left.set_title("the same kills, two recoveries", fontsize=10)
    left.legend(fontsize=8, loc="upper right")
    left.set_ylim(0, 2000)
    left.grid(True, axis="y", linewidth=0.3)

    random_series = ("elastic (C++), 20 random kills", "elastic (Python), 5 random kills")
    for i, series in enumerate(random_series):
        ms = sorted(float(r["kill_to_next_step_ms"]) for r in rows if r["series"] == series)
        # Spread the points sideways in their order so that close ones stay apart.
        spread = [i + 0.3 * (j / max(len(ms) - 1, 1) - 0.5) for j in range(len(ms))]
        right.scatter(spread, ms, s=18, color=GRADWIRE, alpha=0.7)
        median = ms[len(ms) // 2] if len(ms) % 2 else (ms[len(ms) // 2 - 1] + ms[len(ms) // 2]) / 2
        right.hlines(median, i - 0.2, i + 0.2, color="black", linewidth=1.5)
        right.annotate(f"median {median:.0f} ms", (i + 0.22, median), va="center", fontsize=8)
    right.set_xticks(range(len(random_series)),
                     ["C++ (train_elastic), 20 kills", "Python (torch DDP), 5 kills"])
    right.set_xlim(-0.5, len(random_series) - 0.2)
    right.set_ylabel("kill to next completed step (ms)")
    right.set_title("random kills: every run (the 2.4 s one waited for an evaluation)",
                    fontsize=10)
    right.set_ylim(0, 2600)
    right.grid(True, axis="y", linewidth=0.3)
    save(fig, d, "elastic_recovery.png",
         "A SIGKILLed rank of 3, Fashion-MNIST CNN on one host "
         "(2026-11-26, ada86d5, 2-core VM)")


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "docs", "figures")
    for draw in (busbw_one_host, busbw_one_host_gloo, latency_one_host, busbw_across_hosts,
                 latency_across_hosts, elastic_recovery):
        draw(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
