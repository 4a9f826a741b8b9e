#!/usr/bin/env python3
# Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
"""cpu_sharing.py: one rank of issue 46's benchmark (benchmarks/cpu-sharing
launches it under mpirun and prints the table).

Training with the CPU shared, gradwire against PyTorch DDP on gloo in one
job: two copies of ddp_bench.py's CNN (Fashion-MNIST, per-rank batch,
Adam, one intra-op thread), one DDP on a gloo group and one DDP on a
gradwire group, stepped in turn in blocks of --block steps (so a load or a
VM whose speed drifts hits both alike), after a barrier before each block.
With --loader-workers W, every rank also runs a real
torch.utils.data.DataLoader with W worker processes that decode JPEG images
(PIL) and augment them (random crop, flip, normalise) on the same cores; a
thread of the rank drains it as fast as the workers deliver, and the images
delivered during each backend's blocks are that backend's loader
throughput (the work the engine would steal from). Busy processes,
oversubscribed ranks and gradwire's spin budget (GRADWIRE_SPIN_US, which
the launcher exports: `benchmarks/cpu-sharing --spin-budget "auto 0"`)
are the launcher's business.

Per backend, from /proc/self/task/*/schedstat (CPU ns, run-queue wait ns,
exact, per thread):
  step_ms     median step (max over ranks)
  cpu_ms      the rank's CPU time per step, every thread but the drain's
              (max over ranks): compute + the backend's own work
  comm_ms     of which threads other than the training thread (gloo's
              workers; gradwire's engine, watchdog): per step, max over ranks
  wait_ms     the training thread's run-queue wait per step (max over ranks)
  loader_ips  images per second the loaders delivered (sum over ranks)
One "RESULT ..." line per backend from rank 0.
"""
import argparse
import copy
import io
import os
import random
import statistics
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_bench import make_batches, make_model, torchrun_env_from_mpirun, train_step  # noqa: E402


class JpegImages(torch.utils.data.Dataset):
    """N synthetic photographs-to-be (smooth gradients and noise) as JPEG
    bytes; an item decodes one and augments it like a torchvision pipeline
    would (RandomResizedCrop-ish crop, flip, to tensor, normalise)."""

    def __init__(self, n=64, size=160, out=112, seed=3):
        from PIL import Image
        g = torch.Generator().manual_seed(seed)
        self.jpegs = []
        for _ in range(n):
            base = torch.linspace(0, 255, size).repeat(size, 1)
            img = (base.unsqueeze(2).repeat(1, 1, 3) * torch.rand(3, generator=g) +
                   torch.randint(0, 40, (size, size, 3), generator=g)).clamp(0, 255)
            buf = io.BytesIO()
            Image.fromarray(img.to(torch.uint8).numpy()).save(buf, format="JPEG", quality=90)
            self.jpegs.append(buf.getvalue())
        self.out = out

    def __len__(self):
        return 1 << 30  # never ends: the drain thread stops it

    def __getitem__(self, i):
        from PIL import Image
        img = Image.open(io.BytesIO(self.jpegs[i % len(self.jpegs)])).convert("RGB")
        w, h = img.size
        side = random.randint(self.out, min(w, h))
        x0, y0 = random.randint(0, w - side), random.randint(0, h - side)
        img = img.crop((x0, y0, x0 + side, y0 + side)).resize((self.out, self.out))
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
        t = t.view(self.out, self.out, 3).permute(2, 0, 1).float().div_(255)
        return (t - 0.5) / 0.25, i % 10


class Drain:
    """Pulls batches from a DataLoader on a thread, counting images."""

    def __init__(self, workers, batch):
        self.images = 0
        self.stop = False
        self.tid = None
        self.loader = torch.utils.data.DataLoader(
            JpegImages(), batch_size=batch, num_workers=workers, shuffle=False,
            persistent_workers=True, prefetch_factor=2)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        self.tid = threading.get_native_id()
        for x, _ in self.loader:
            self.images += x.shape[0]
            if self.stop:
                break


def thread_times(exclude):
    """(cpu ns of the main thread, cpu ns of the others, main's run-queue
    wait ns), from schedstat, skipping the thread ids in `exclude`."""
    main_tid = os.getpid()
    main_cpu = other_cpu = main_wait = 0
    for tid in os.listdir("/proc/self/task"):
        t = int(tid)
        if t in exclude:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu, wait, _ = (int(v) for v in f.read().split())
        except OSError:
            continue  # a thread that just ended
        if t == main_tid:
            main_cpu, main_wait = cpu, wait
        else:
            other_cpu += cpu
    return main_cpu, other_cpu, main_wait


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--loader-workers", type=int, default=0)
    ap.add_argument("--loader-batch", type=int, default=16)
    ap.add_argument("--case", default="idle")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default="cnn")
    a = ap.parse_args()
    import gradwire.torch  # noqa: F401 - registers the backend
    rank, world = torchrun_env_from_mpirun("29541")
    dist.init_process_group("gloo")
    gw_group = dist.new_group(backend="gradwire")
    torch.set_num_threads(1)
    torch.manual_seed(1 + rank)
    base = make_model(a)
    nets = {"gloo": nn.parallel.DistributedDataParallel(copy.deepcopy(base)),
            "gradwire": nn.parallel.DistributedDataParallel(copy.deepcopy(base),
                                                            process_group=gw_group)}
    opts = {k: torch.optim.Adam(v.parameters(), lr=1e-3, foreach=False) for k, v in nets.items()}
    batch = make_batches(a, rank, world)
    drain = Drain(a.loader_workers, a.loader_batch) if a.loader_workers else None
    while drain and drain.tid is None:
        time.sleep(0.01)
    exclude = {drain.tid} if drain else set()

    acc = {k: {"times": [], "cpu": 0, "other": 0, "wait": 0, "images": 0, "wall": 0.0,
               "steps": 0} for k in nets}
    step = {k: 0 for k in nets}
    total = a.warmup + a.steps
    while any(step[k] < total for k in nets):
        for k, net in nets.items():
            dist.barrier()  # every rank starts the block together
            timed = step[k] >= a.warmup
            c0, o0, w0 = thread_times(exclude)
            i0, t0 = (drain.images if drain else 0), time.perf_counter()
            n = 0
            for _ in range(a.block):
                if step[k] >= total:
                    break
                x, y = batch(step[k])
                s0 = time.perf_counter()
                train_step(net, opts[k], x, y)
                if step[k] >= a.warmup:
                    acc[k]["times"].append(time.perf_counter() - s0)
                step[k] += 1
                n += 1
            if not timed or n == 0:
                continue
            c1, o1, w1 = thread_times(exclude)
            r = acc[k]
            r["wall"] += time.perf_counter() - t0
            r["images"] += (drain.images if drain else 0) - i0
            r["cpu"] += (c1 - c0) + (o1 - o0)
            r["other"] += o1 - o0
            r["wait"] += w1 - w0
            r["steps"] += n
    for k in nets:
        r = acc[k]
        per = max(1, r["steps"])
        mx = torch.tensor([statistics.median(r["times"]) * 1e3, r["cpu"] / per / 1e6,
                           r["other"] / per / 1e6, r["wait"] / per / 1e6], dtype=torch.float64)
        sm = torch.tensor([r["images"] / r["wall"] if r["wall"] else 0.0], dtype=torch.float64)
        dist.all_reduce(mx, op=dist.ReduceOp.MAX)
        dist.all_reduce(sm, op=dist.ReduceOp.SUM)
        if rank == 0:
            print(f"RESULT case={a.case} impl={k} world={world} step_ms={mx[0].item():.3f} "
                  f"cpu_ms={mx[1].item():.3f} comm_ms={mx[2].item():.3f} "
                  f"wait_ms={mx[3].item():.3f} loader_ips={sm[0].item():.1f}", flush=True)
    if drain:
        drain.stop = True
    dist.barrier()
    dist.destroy_process_group()
    if drain:  # the workers end with the loader's iterator; the drain thread is a daemon
        del drain.loader


if __name__ == "__main__":
    main()
