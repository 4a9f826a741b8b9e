#!/usr/bin/env python3
# Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
"""link_bench.py: the PyTorch DDP twin of build/benchmarks/link_bench.

Same wide MLP (784 -> H -> H -> 10), synthetic data, per-rank batch B, Adam,
one intra-op thread, the timed step = zero_grad + forward + backward (incl.
DDP's allreduce) + optimizer step, median per rank, max over ranks. DDP over
gloo, without a hook or with torch's own powerSGD_hook (rank R,
start_powerSGD_iter 6: torch requires > 1 with error feedback / warm start;
the compressed stage starts inside the warm-up either way).

    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. GLOO_SOCKET_IFNAME=.. \
        python3 benchmarks/link_bench.py --mode none|powersgd
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["none", "powersgd"], default="none")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rank", type=int, default=4)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    net = torch.nn.Sequential(
        torch.nn.Linear(784, a.hidden), torch.nn.ReLU(),
        torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU(),
        torch.nn.Linear(a.hidden, 10))
    # PowerSGD under gloo: with several buckets, the hook's chained futures
    # issue their allreduces from completion callbacks, in an order that
    # differs between ranks, and gloo fails with "Received data size doesn't
    # match expected size ... collective mismatch" (observed with torch
    # 2.15). One bucket for everything avoids the interleaving; gradwire's
    # hook queues both allreduces of a bucket in bucket order instead (Note
    # [composite operations] in src/compress/powersgd.cpp).
    model = DDP(net, bucket_cap_mb=1024) if a.mode == "powersgd" else DDP(net)
    if a.mode == "powersgd":
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=a.rank,
                                   start_powerSGD_iter=6)
        model.register_comm_hook(state, psgd.powerSGD_hook)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    gen = torch.Generator().manual_seed(7 + rank)
    times = []
    for s in range(a.warmup + a.steps):
        x = torch.randn(a.batch, 784, generator=gen)
        y = torch.randint(0, 10, (a.batch,), generator=gen)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    params = sum(p.numel() for p in net.parameters())
    if rank == 0:
        print(f"RESULT impl=pytorch-ddp-gloo mode={a.mode} world={world} params={params} "
              f"hidden={a.hidden} batch={a.batch} step_ms={med.item() * 1e3:.2f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
