#!/usr/bin/env python3
"""torch_backend_compare.py: gradwire as a torch.distributed backend, measured
two ways on 2 ranks (mpirun, shm):

 1. DDP step time: examples/train_ddp.py (an unmodified DDP script) with
    --backend gradwire and --backend gloo, alternating, --repeats times each;
    median step time per run (max over ranks), then the median over runs.
 2. Collective bandwidth: benchmarks/torch_perf.py --backend gradwire against
    the C++ harness build/benchmarks/gradwire-perf with the same flags
    (default -b 16M -e 256M -f 2), busbw ratio per size.

    python3 benchmarks/torch_backend_compare.py [--build build] [--repeats 3]

Needs PYTHONPATH to reach the extension (default: <build>/python is added).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def run(cmd, env):
    p = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout[-4000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--hook", default="none")
    ap.add_argument("--sweep", default="-b 16M -e 256M -f 2 -n 10 -w 3")
    ap.add_argument("--skip-ddp", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    a = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(a.build, "python"),
                                                      env.get("PYTHONPATH")]))
    env.setdefault("GRADWIRE_OFI_PROVIDER", "shm")
    mp = MPIRUN + ["-np", str(a.np), "-x", "PYTHONPATH", "-x", "GRADWIRE_OFI_PROVIDER"]

    if not a.skip_ddp:
        runs = {"gradwire": [], "gloo": []}
        for _ in range(a.repeats):
            for backend in runs:
                out = run(mp + [sys.executable, "examples/train_ddp.py", "--backend", backend,
                                "--steps", str(a.steps), "--hook", a.hook, "--log-every",
                                "1000000"], env)
                runs[backend].append(float(re.search(r"step_ms=([0-9.]+)", out).group(1)))
        print(f"DDP step time, examples/train_ddp.py, {a.np} ranks, hook {a.hook}, "
              f"{a.steps} timed steps, {a.repeats} runs each (median step ms per run):")
        for backend, v in runs.items():
            print(f"  {backend:9s} median {statistics.median(v):8.3f} ms   runs "
                  + " ".join(f"{x:.3f}" for x in v))
        ratio = statistics.median(runs["gloo"]) / statistics.median(runs["gradwire"])
        print(f"  gloo / gradwire step time: {ratio:.3f} (>= 1: gradwire at least as fast)")

    if not a.skip_sweep:
        flags = a.sweep.split()
        with tempfile.TemporaryDirectory() as d:
            cpp_json, py_json = os.path.join(d, "cpp.json"), os.path.join(d, "py.json")
            run(mp + [os.path.join(a.build, "benchmarks", "gradwire-perf"), *flags, "-c", "0",
                      "--json", cpp_json], env)
            run(mp + [sys.executable, "benchmarks/torch_perf.py", "--backend", "gradwire",
                      *flags, "--json", py_json], env)
            cpp = {r["bytes"]: r for r in json.load(open(cpp_json))["rows"]
                   if r.get("impl", "gradwire") == "gradwire"}
            py = {r["bytes"]: r for r in json.load(open(py_json))["rows"]}
        print(f"\nallreduce float32 sum, {a.np} ranks, flags {a.sweep}: busbw GB/s")
        print(f"  {'bytes':>12} {'gradwire-perf':>14} {'torch.distributed':>18} {'ratio':>7}")
        for b in sorted(py):
            c = cpp.get(b) or min(cpp.values(), key=lambda r: abs(r["bytes"] - b))
            print(f"  {b:12d} {c['busbw_gbs']:14.3f} {py[b]['busbw_gbs']:18.3f} "
                  f"{py[b]['busbw_gbs'] / c['busbw_gbs']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
