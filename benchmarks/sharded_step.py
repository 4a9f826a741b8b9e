#!/usr/bin/env python3
# Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
"""sharded_step.py: the torch FSDP2 twin of build/benchmarks/sharded_step.

The same small transformer LM (token embedding + learned positions, L
post-norm encoder layers with a 4x MLP and no dropout under a causal mask, a
linear head; float32, no mixed precision), random tokens, per-rank batch B,
Adam lr 1e-3, one intra-op thread. FSDP2 (torch.distributed.fsdp.fully_shard)
over gloo: the embedding, each layer and the head are fully_shard'ed, then
the root (which holds the position table). --mode fsdp2 keeps FSDP2's
default reshard_after_forward=True (ZeRO-3: parameters gathered again in
backward); --mode fsdp2-keep sets it False (held from forward to the end of
backward), which is what gradwire's stage 3 does without after_forward()
(Note [stage 3 units], Note [reshard after forward]).
Timed step = zero_grad + forward + backward + optimizer step; median per
rank, max over ranks.

    RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. \
        python3 benchmarks/sharded_step.py --mode fsdp2|fsdp2-keep [shape options]
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Lm(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = torch.nn.Embedding(a.vocab, a.model)
        self.pos = torch.nn.Parameter(torch.randn(a.seq, 1, a.model) * 0.02)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(a.model, a.heads, dim_feedforward=4 * a.model,
                                             dropout=0.0)
            for _ in range(a.layers))
        self.head = torch.nn.Linear(a.model, a.vocab)

    def forward(self, tokens):  # [seq, batch] -> [seq, batch, vocab]
        s = tokens.shape[0]
        mask = torch.triu(torch.full((s, s), float("-inf")), 1)
        h = self.embed(tokens) + self.pos[:s]
        for layer in self.layers:
            h = layer(h, src_mask=mask)
        return self.head(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["fsdp2", "fsdp2-keep"], default="fsdp2")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    net = Lm(a)
    params = sum(p.numel() for p in net.parameters())
    mesh = init_device_mesh("cpu", (world,))
    reshard = a.mode == "fsdp2"
    fully_shard(net.embed, mesh=mesh, reshard_after_forward=reshard)
    for layer in net.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(net.head, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(net, mesh=mesh, reshard_after_forward=reshard)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(7 + rank)
    times = []
    for s in range(a.warmup + a.steps):
        seq = torch.randint(a.vocab, (a.seq + 1, a.batch), generator=gen)
        inp, target = seq[:-1], seq[1:]
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(inp).reshape(-1, a.vocab), target.reshape(-1))
        loss.backward()
        opt.step()
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"RESULT impl=torch-fsdp2-gloo mode={a.mode} world={world} params={params} "
              f"step_ms={med.item() * 1e3:.2f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
