#!/usr/bin/env python3
"""Data-parallel training of a small CNN on Fashion-MNIST with PyTorch's own
DistributedDataParallel; gradwire is just the torch.distributed backend.

The script is an ordinary DDP script: the only gradwire-specific lines are the
import and, optionally, a comm hook. Launch with torchrun or mpirun:

    torchrun --standalone --nproc_per_node 2 examples/train_ddp.py --backend gradwire
    mpirun -np 2 python3 examples/train_ddp.py --backend gradwire --hook fp16
    torchrun --standalone --nproc_per_node 2 examples/train_ddp.py --backend gloo   # to compare

Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
Rank 0 prints the loss every --log-every steps and, at the end, one line
"RESULT backend=... step_ms=..." with the median step time (max over ranks),
which benchmarks/torch_backend_compare uses.
"""
import argparse
import hashlib
import os
import signal
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import gradwire.torch  # registers backend "gradwire" (and maps mpirun's variables)
from gradwire.torch import hooks
from fashion_mnist import Cnn, load_train  # examples/fashion_mnist.py, next to this script


def save(directory, step, model, optimizer, rank):
    """Every rank writes its random state (dropout differs per rank), then
    rank 0 the replicas' state (DDP keeps them identical), renamed into
    place last: a step whose model file exists is complete, so a kill never
    leaves a partial checkpoint as the newest."""
    os.makedirs(directory, exist_ok=True)
    write(os.path.join(directory, f"rng-{step:09d}-{rank}.pt"), torch.get_rng_state())
    dist.barrier()
    if rank == 0:
        write(os.path.join(directory, f"step-{step:09d}.pt"),
              {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()})
    dist.barrier()


def write(path, obj):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load_newest(directory, model, optimizer, rank):
    names = sorted(n for n in os.listdir(directory)
                   if n.startswith("step-") and n.endswith(".pt")) if os.path.isdir(directory) else []
    if not names:
        return 0
    state = torch.load(os.path.join(directory, names[-1]), map_location="cpu")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    step = int(state["step"])
    torch.set_rng_state(torch.load(os.path.join(directory, f"rng-{step:09d}-{rank}.pt")))
    return step


def digest(model, optimizer):
    """sha256 of the parameters and the optimizer's moments, in order."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
        for v in optimizer.state.get(p, {}).values():
            if torch.is_tensor(v):
                h.update(v.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="gradwire", help="torch.distributed backend")
    ap.add_argument("--hook", choices=["none", "fp16", "bf16"], default="none",
                    help="gradwire's DDP comm hook (compress gradients to 16 bits)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20, help="steps left out of the timing")
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--checkpoint", default="", help="directory for checkpoints ('' = none)")
    ap.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints")
    ap.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    ap.add_argument("--kill-at-step", type=int, default=-1,
                    help="SIGKILL --kill-rank after this step (first torchrun generation only)")
    ap.add_argument("--kill-rank", type=int, default=0)
    a = ap.parse_args()

    dist.init_process_group(backend=a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1 + rank)  # DDP broadcasts rank 0's parameters

    images, labels = load_train(a.data)
    model = Cnn()
    ddp = DDP(model)
    if a.hook == "fp16":
        ddp.register_comm_hook(None, hooks.fp16_compress_hook)
    elif a.hook == "bf16":
        ddp.register_comm_hook(None, hooks.bf16_compress_hook)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)

    start = 0
    if a.resume and a.checkpoint:
        start = load_newest(a.checkpoint, model, optimizer, rank)
        if rank == 0:
            print(f"resumed at step {start}" if start else "no checkpoint: starting afresh",
                  flush=True)
    first_generation = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"

    step_s = []
    for s in range(start, a.warmup + a.steps):
        first = (s * world + rank) * a.batch
        sel = torch.arange(first, first + a.batch) % labels.shape[0]
        x, y = images.index_select(0, sel), labels.index_select(0, sel)
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()  # gradients averaged over ranks when this returns
        optimizer.step()
        step_s.append(time.perf_counter() - t0)
        if rank == 0 and (s + 1) % a.log_every == 0:
            print(f"step {s + 1}: loss {loss.item():.4f}", flush=True)
        if a.checkpoint and a.checkpoint_every > 0 and (s + 1) % a.checkpoint_every == 0:
            save(a.checkpoint, s + 1, model, optimizer, rank)
        if s + 1 == a.kill_at_step and rank == a.kill_rank and first_generation:
            print(f"rank {rank}: killed at step {s + 1} (--kill-at-step)", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    med = torch.tensor([statistics.median(step_s[a.warmup:] or step_s)], dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"RESULT backend={a.backend} hook={a.hook} world={world} batch={a.batch} "
              f"steps={a.steps} threads={a.threads} step_ms={med.item() * 1e3:.4f}", flush=True)
    # One write per line: the ranks share torchrun's stdout.
    sys.stdout.flush()
    os.write(1, f"rank {rank} state at step {a.warmup + a.steps}: {digest(model, optimizer)}\n"
             .encode())
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: train_ddp done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
