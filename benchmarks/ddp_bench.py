#!/usr/bin/env python3
"""ddp_bench.py: per-step time of PyTorch's own DistributedDataParallel (gloo).

The twin of build/benchmarks/ddp_bench (gradwire); benchmarks/ddp_compare runs
both and prints the table. Launched with mpirun (OMPI_COMM_WORLD_* are mapped
to torch.distributed's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT) or torchrun:

    mpirun -np 1 python3 benchmarks/ddp_bench.py --mode plain   # no DDP, no process group
    mpirun -np 1 python3 benchmarks/ddp_bench.py --mode ddp     # DDP over a world of one
    mpirun -np 2 python3 benchmarks/ddp_bench.py --mode ddp     # 2 ranks
    mpirun -np 2 python3 benchmarks/ddp_bench.py --mode plain   # 2 independent processes at once

Kept identical to benchmarks/ddp_bench.cpp (see its header for the method):
the example's CNN, Fashion-MNIST's training set normalised the same way,
step s on rank r takes images [(s*w + r)*B, +B) mod N, per-rank batch B,
Adam(lr 1e-3) (foreach=False: libtorch's C++ Adam also updates one parameter
at a time), cross-entropy, one intra-op thread (torch.set_num_threads(1)),
timed step = zero_grad + forward + backward (incl. DDP's allreduce) +
optimizer step, median over the timed steps per rank, max over ranks. DDP
with its defaults (gloo, first bucket 1 MiB, then 25 MiB).
One "RESULT key=value ..." line from rank 0 in ddp mode (max over ranks),
from every process in plain mode.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from fashion_mnist import Cnn, load_train  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["ddp", "plain"], default="ddp")
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()

    # mpirun provides OMPI_COMM_WORLD_*; torch.distributed wants the torchrun names.
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
        os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
        os.environ.setdefault("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", os.environ.get("DDP_BENCH_PORT", "29531"))
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    ddp_mode = a.mode == "ddp"
    # The plain baseline creates no process group (no gloo threads).
    if ddp_mode:
        dist.init_process_group("gloo")
    torch.set_num_threads(a.threads)  # 1: two ranks on two cores, no oversubscription
    torch.manual_seed(1 + rank)  # DDP's broadcast makes the replicas equal

    images, labels = load_train(a.data)
    n_images = labels.shape[0]
    model = Cnn()
    net = nn.parallel.DistributedDataParallel(model) if ddp_mode else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)

    step_s = []
    for s in range(a.warmup + a.steps):
        first = (s * world + rank) * a.batch
        sel = torch.arange(first, first + a.batch) % n_images
        x, y = images.index_select(0, sel), labels.index_select(0, sel)

        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()  # with DDP: gradients averaged over ranks when this returns
        optimizer.step()
        t1 = time.perf_counter()
        if s >= a.warmup:
            step_s.append(t1 - t0)

    med = statistics.median(step_s)
    extra = ""
    if ddp_mode:
        worst = torch.tensor([med], dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        med = worst.item()
        # c10d's own sampled timings, where this torch records them (ns).
        try:
            info = net._get_ddp_logging_data()
            comm = info.get("avg_backward_comm_time", 0)
            overlap = info.get("avg_backward_compute_comm_overlap_time", 0)
            if comm:
                extra = (f" c10d_comm_ms={comm / 1e6:.4f} c10d_overlap_ms={overlap / 1e6:.4f}"
                         f" c10d_hidden_fraction={overlap / comm:.4f}")
        except Exception:  # noqa: BLE001 - private API, optional
            pass
    if rank == 0 or not ddp_mode:
        print(f"RESULT impl=pytorch mode={a.mode} world={world} rank={rank} batch={a.batch} "
              f"warmup={a.warmup} steps={a.steps} threads={a.threads} step_ms={med * 1e3:.4f}"
              f"{extra} torch={torch.__version__}", flush=True)
    if ddp_mode:
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
