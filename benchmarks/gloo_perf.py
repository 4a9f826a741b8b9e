#!/usr/bin/env python3
"""The gradwire-perf sweep through torch.distributed's gloo backend.

Launched like gradwire-perf, with `mpirun -np N` (reads OMPI_COMM_WORLD_*) or
torchrun; writes rows in gradwire-perf's JSON schema (impl "gloo") so
benchmarks/plot.py and benchmarks/compare.py read all three implementations.

    mpirun -np 2 python3 benchmarks/gloo_perf.py -b 8 -e 64M -f 4 --json gloo.json
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
          "uint8": torch.uint8}
OPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
       "prod": dist.ReduceOp.PRODUCT}


def size_arg(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def bus_factor(coll: str, n: int) -> float:
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll == "broadcast":
        return 1.0
    return (n - 1) / n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", type=size_arg, default=8)
    ap.add_argument("-e", type=size_arg, default=64 << 20)
    ap.add_argument("-f", type=float, default=2)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("-d", default="float32", choices=sorted(DTYPES))
    ap.add_argument("-o", default="sum", choices=sorted(OPS))
    ap.add_argument("--op", default="allreduce",
                    choices=["allreduce", "reduce_scatter", "allgather", "broadcast", "alltoall"])
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    # mpirun provides OMPI_COMM_WORLD_*; torch wants the torchrun names.
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
        os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", os.environ.get("GLOO_PERF_PORT", "29511"))
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    dt = DTYPES[a.d]
    es = torch.tensor([], dtype=dt).element_size()
    rows = []
    size = float(a.b)
    if rank == 0:
        print(f"# gloo_perf: {a.op}, {n} ranks, torch {torch.__version__}, dtype {a.d}, op {a.o}")
    while size <= a.e * 1.0000001:
        nbytes = max(es, int(size) // es * es)
        count = nbytes // es
        per = count // n
        send = torch.ones(count, dtype=dt)
        if a.op == "allreduce":
            recv = send.clone()
            launch = lambda: dist.all_reduce(recv, op=OPS[a.o])  # noqa: E731
        elif a.op == "reduce_scatter":
            send = torch.ones(per * n, dtype=dt)
            recv = torch.empty(per, dtype=dt)
            launch = lambda: dist.reduce_scatter_tensor(recv, send, op=OPS[a.o])  # noqa: E731
        elif a.op == "allgather":
            mine = torch.ones(per, dtype=dt)
            recv = torch.empty(per * n, dtype=dt)
            launch = lambda: dist.all_gather_into_tensor(recv, mine)  # noqa: E731
        elif a.op == "broadcast":
            recv = send.clone()
            launch = lambda: dist.broadcast(recv, src=0)  # noqa: E731
        else:
            send = torch.ones(per * n, dtype=dt)
            recv = torch.empty(per * n, dtype=dt)
            launch = lambda: dist.all_to_all_single(recv, send)  # noqa: E731
        row = {"impl": "gloo", "coll": a.op, "ranks": n, "provider": "tcp (gloo)", "dtype": a.d,
               "op": a.o, "bytes": nbytes, "count": count, "available": True, "time_us": 0.0,
               "algbw_gbs": 0.0, "busbw_gbs": 0.0, "wrong": 0}
        try:
            for _ in range(a.w):
                launch()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.n):
                launch()
            us = torch.tensor([(time.perf_counter() - t0) / a.n * 1e6], dtype=torch.float64)
            dist.all_reduce(us, op=dist.ReduceOp.MAX)
            row["time_us"] = us.item()
            row["algbw_gbs"] = nbytes / (row["time_us"] * 1e-6) / 1e9
            row["busbw_gbs"] = row["algbw_gbs"] * bus_factor(a.op, n)
        except RuntimeError as e:  # the backend lacks this collective or dtype
            row["available"] = False
            if rank == 0:
                print(f"# gloo cannot run {a.op} {a.d}: {e}".splitlines()[0])
        if rank == 0 and row["available"]:
            print(f" {nbytes:12d} {count:12d} {a.d:>9} {a.o:>7} {row['time_us']:11.2f} "
                  f"{row['algbw_gbs']:9.3f} {row['busbw_gbs']:9.3f} {0:7d}  gloo", flush=True)
        rows.append(row)
        size *= a.f
    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
