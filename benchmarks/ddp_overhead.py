#!/usr/bin/env python3
"""ddp_overhead.py: what DDP's gradient exchange costs per step through
torch.distributed, backend gradwire against gloo (issue 18's target: <= 0.5x
gloo's communication overhead).

For each model (the Fashion-MNIST CNN, and a 17 M-parameter transformer on
synthetic tokens; benchmarks/ddp_bench.py), runs alternately, --repeats
times: 2 independent processes without DDP at once (the single-process step
on a machine as busy as the DDP run's), and DDP over 2 ranks with backend
gloo and with backend gradwire (mpirun, shm). Overhead = DDP step - plain
step (medians of the runs' medians); prints a markdown table.

    PYTHONPATH=build/python python3 benchmarks/ddp_overhead.py [--repeats 3] [--steps 60]

--paired: instead, each repeat is one job that steps all three in turn
(ddp_bench.py --mode paired), so the three share the machine's speed of the
moment; the overheads are per job, then their median.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "PYTHONPATH",
          "-x", "GRADWIRE_OFI_PROVIDER"]


def bench(model, a, *args, timeout=1800):
    """Runs ddp_bench.py under mpirun; its stdout (exits on failure)."""
    cmd = MPIRUN + [sys.executable, os.path.join(ROOT, "benchmarks", "ddp_bench.py"),
                    "--model", model, "--steps", str(a.steps), "--warmup", str(a.warmup),
                    "--batch", str(a.batch[model]), *args]
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if p.returncode != 0 or "RESULT" not in p.stdout:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout[-3000:]}")
    return p.stdout


def step_ms(model, mode, backend, a):
    out = bench(model, a, "--mode", mode, "--backend", backend)
    # plain: the slower of the two processes
    return max(float(m) for m in re.findall(r"RESULT .*step_ms=([0-9.]+)", out))


def paired_ms(model, a):
    out = bench(model, a, "--mode", "paired", "--block", str(a.block), timeout=3600)
    found = dict(re.findall(r"RESULT .*net=(\w+) .*step_ms=([0-9.]+)", out))
    if len(found) != 4:
        sys.exit(f"paired run printed {sorted(found)}, not plain/sync/gloo/gradwire\n{out[-3000:]}")
    return {k: float(v) for k, v in found.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--models", default="cnn,transformer")
    ap.add_argument("--paired", action="store_true")
    ap.add_argument("--block", type=int, default=5)
    a = ap.parse_args()
    a.batch = {"cnn": 64, "transformer": 2}
    os.environ.setdefault("GRADWIRE_OFI_PROVIDER", "shm")
    os.environ["PYTHONPATH"] = os.environ.get("PYTHONPATH", os.path.join(ROOT, "build", "python"))
    print("| model | plain step (ms) | gloo step | gradwire step | gloo overhead | "
          "gradwire overhead | gradwire / gloo overhead |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for model in a.models.split(","):
        runs = {"plain": [], "gloo": [], "gradwire": []}
        if a.paired:
            runs["sync"] = []
            jobs = [paired_ms(model, a) for _ in range(a.repeats)]
            for k in runs:
                runs[k] = [j[k] for j in jobs]
            og = statistics.median(j["gloo"] - j["plain"] for j in jobs)
            ow = statistics.median(j["gradwire"] - j["plain"] for j in jobs)
            sync = statistics.median(j["sync"] - j["plain"] for j in jobs)
            med = {k: statistics.median(v) for k, v in runs.items()}
            print(f"| {model} | {med['plain']:.2f} | {med['gloo']:.2f} | {med['gradwire']:.2f} | "
                  f"{og:.2f} | {ow:.2f} | {ow / og if og > 0 else float('nan'):.2f} |")
            print(f"  waiting for the slower rank alone (plain + a barrier per step): "
                  f"{sync:.2f} ms of the overheads", file=sys.stderr)
            print("  jobs (plain / sync / gloo / gradwire ms): " + "; ".join(
                f"{j['plain']:.2f} / {j['sync']:.2f} / {j['gloo']:.2f} / {j['gradwire']:.2f}"
                for j in jobs), file=sys.stderr)
            continue
        for _ in range(a.repeats):
            runs["plain"].append(step_ms(model, "plain", "gloo", a))
            runs["gloo"].append(step_ms(model, "ddp", "gloo", a))
            runs["gradwire"].append(step_ms(model, "ddp", "gradwire", a))
        med = {k: statistics.median(v) for k, v in runs.items()}
        og, ow = med["gloo"] - med["plain"], med["gradwire"] - med["plain"]
        print(f"| {model} | {med['plain']:.2f} | {med['gloo']:.2f} | {med['gradwire']:.2f} | "
              f"{og:.2f} | {ow:.2f} | {ow / og if og > 0 else float('nan'):.2f} |")
        print("  runs: " + "; ".join(f"{k} " + " / ".join(f"{x:.2f}" for x in v)
                                     for k, v in runs.items()), file=sys.stderr)


if __name__ == "__main__":
    main()
