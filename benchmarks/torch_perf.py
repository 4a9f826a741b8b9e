#!/usr/bin/env python3
"""torch_perf.py: collective bandwidth through torch.distributed, in the
conventions of nccl-tests and build/benchmarks/gradwire-perf (same flags,
same columns, same JSON rows), for any backend, so the Python path can be
compared with the C++ harness:

    mpirun -np 2 python3 benchmarks/torch_perf.py --backend gradwire -b 16M -e 256M -f 2
    mpirun -np 2 build/benchmarks/gradwire-perf -b 16M -e 256M -f 2

time = the slowest rank's mean per iteration (blocking: each call waits, as
gradwire-perf's default -z 1); algbw = bytes / time; busbw = algbw x 2(n-1)/n
(allreduce), (n-1)/n (reduce_scatter, allgather, alltoall), 1 (broadcast).
Bytes are the full buffer (count x element size), as in gradwire-perf.
"""
import argparse
import json
import sys
import time

import torch
import torch.distributed as dist

import gradwire.torch  # noqa: F401 - backend "gradwire", mpirun variables

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64}
OPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
       "prod": dist.ReduceOp.PRODUCT, "avg": dist.ReduceOp.AVG}


def size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip()
    return int(float(t[:-1]) * mult[t[-1].upper()]) if t[-1].upper() in mult else int(t)


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2 * (n - 1) / n
    if coll == "broadcast":
        return 1.0
    return (n - 1) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="gradwire")
    ap.add_argument("--op", dest="coll", default="allreduce",
                    choices=["allreduce", "reduce_scatter", "allgather", "broadcast", "alltoall"])
    ap.add_argument("-b", type=size, default=8)
    ap.add_argument("-e", type=size, default=64 << 20)
    ap.add_argument("-f", type=float, default=2)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("-z", type=int, default=1, help="1: wait each call; 0: wait all at the end")
    ap.add_argument("-d", default="float32", choices=sorted(DTYPES))
    ap.add_argument("-o", default="sum", choices=sorted(OPS))
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (1: no OpenMP pool competing with the "
                         "communication threads, like the C++ harness)")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    dist.init_process_group(backend=a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[a.d]
    es = torch.tensor([], dtype=dtype).element_size()
    if rank == 0:
        print(f"# torch.distributed backend {a.backend}, {a.coll}, {n} ranks, torch {torch.__version__}")
        print(f"# {'size':>12} {'count':>12} {'type':>9} {'redop':>7} {'time(us)':>11} "
              f"{'algbw':>9} {'busbw':>9}")
    rows = []
    nbytes = max(a.b, es * n)
    while nbytes <= a.e:
        count = nbytes // es // n * n  # a multiple of the world size
        buf = torch.ones(count, dtype=dtype)
        shard = torch.empty(count // n, dtype=dtype)
        out = torch.empty_like(buf)

        def launch():
            if a.coll == "allreduce":
                return dist.all_reduce(buf, op=OPS[a.o], async_op=True)
            if a.coll == "reduce_scatter":
                return dist.reduce_scatter_tensor(shard, buf, op=OPS[a.o], async_op=True)
            if a.coll == "allgather":
                return dist.all_gather_into_tensor(out, shard, async_op=True)
            if a.coll == "broadcast":
                return dist.broadcast(buf, src=0, async_op=True)
            return dist.all_to_all_single(out, buf, async_op=True)

        for _ in range(a.w):
            launch().wait()
        dist.barrier()
        t0 = time.perf_counter()
        if a.z:
            for _ in range(a.n):
                launch().wait()
        else:
            for w in [launch() for _ in range(a.n)]:
                w.wait()
        us = torch.tensor([(time.perf_counter() - t0) / a.n * 1e6], dtype=torch.float64)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        t = us.item()
        b = count * es
        algbw = b / (t * 1e-6) / 1e9
        busbw = algbw * bus_factor(a.coll, n)
        rows.append({"impl": f"torch.distributed/{a.backend}", "coll": a.coll, "ranks": n,
                     "dtype": a.d, "op": a.o, "bytes": b, "count": count, "available": True,
                     "time_us": t, "algbw_gbs": algbw, "busbw_gbs": busbw, "wrong": 0})
        if rank == 0:
            print(f"  {b:12d} {count:12d} {a.d:>9} {a.o:>7} {t:11.2f} {algbw:9.3f} {busbw:9.3f}",
                  flush=True)
        nbytes = int(nbytes * a.f) if a.f > 1 else a.e + 1
    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
