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

Issue 18 adds --backend gradwire (the same DDP over gradwire's
torch.distributed backend) and --model transformer: a 17 M-parameter decoder
(vocabulary 8192, width 384, 6 layers of 6 heads, feed-forward 1536, tied
nothing) on synthetic tokens (sequence 64, --batch sequences per rank; ddp_overhead uses 2), so
DDP's buckets are those of a language model rather than a CNN's;
benchmarks/ddp_overhead runs the comparison.

--mode paired (2+ ranks) measures all three in one job, so that a VM whose
speed drifts between runs (this one's does, by 20-30 %) cannot bias the
difference: three copies of the same model (plain, DDP on a gloo group, DDP
on a gradwire group), stepped in turn in blocks of --block steps, --steps
timed steps each; and a fourth copy, "sync", stepped without DDP but with
a barrier at the end of each step (what waiting for the slower rank costs,
whatever the backend). Prints one RESULT line per mode (max over ranks of
each mode's median step).
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


class TinyLM(nn.Module):
    """A decoder-only transformer of ~17 M parameters (issue 18's 10-25 M)."""

    def __init__(self, vocab=8192, width=384, layers=6, heads=6, ff=1536, seq=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(seq, width))
        layer = nn.TransformerEncoderLayer(width, heads, ff, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        return self.head(self.blocks(h, mask=self.mask, is_causal=True))


def train_step(net, optimizer, x, y):
    """The timed step: zero_grad, forward, backward (DDP's allreduce), optimizer step."""
    optimizer.zero_grad()
    out = net(x)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    loss.backward()
    optimizer.step()


def torchrun_env_from_mpirun(default_port):
    """mpirun provides OMPI_COMM_WORLD_*; torch.distributed wants the
    torchrun names (MASTER_PORT: DDP_BENCH_PORT or `default_port`).
    Returns (rank, world size)."""
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
        os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
        os.environ.setdefault("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", os.environ.get("DDP_BENCH_PORT", default_port))
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def make_model(a):
    return Cnn() if a.model == "cnn" else TinyLM()


def make_batches(a, rank, world):
    """batch(s) -> (x, y) for step s, the same on every mode."""
    if a.model == "cnn":
        images, labels = load_train(a.data)
        n = labels.shape[0]

        def batch(s):
            first = (s * world + rank) * a.batch
            sel = torch.arange(first, first + a.batch) % n
            return images.index_select(0, sel), labels.index_select(0, sel)
        return batch
    # Synthetic tokens: a fixed pool of sequences; the target is the next token.
    gen = torch.Generator().manual_seed(7)
    pool = torch.randint(0, 8192, (512, 65), generator=gen)

    def batch(s):
        first = (s * world + rank) * a.batch
        seqs = pool.index_select(0, torch.arange(first, first + a.batch) % pool.shape[0])
        return seqs[:, :-1], seqs[:, 1:]
    return batch


def paired(a, rank, world) -> int:
    """--mode paired: plain, gloo DDP and gradwire DDP in turn, in one job."""
    import copy
    dist.init_process_group("gloo")
    gw_group = dist.new_group(backend="gradwire")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1 + rank)
    base = make_model(a)
    # "sync": the plain model and a barrier at the end of each step (through
    # gradwire: ~1 us): what waiting for the slower rank costs a step, which
    # any data-parallel step pays whatever its backend.
    nets = {
        "plain": copy.deepcopy(base),
        "sync": copy.deepcopy(base),
        "gloo": nn.parallel.DistributedDataParallel(copy.deepcopy(base)),
        "gradwire": nn.parallel.DistributedDataParallel(copy.deepcopy(base),
                                                        process_group=gw_group),
    }
    opts = {k: torch.optim.Adam(v.parameters(), lr=1e-3, foreach=False) for k, v in nets.items()}
    batch = make_batches(a, rank, world)
    times = {k: [] for k in nets}
    step = {k: 0 for k in nets}
    total = a.warmup + a.steps
    while any(step[k] < total for k in nets):
        for k, net in nets.items():
            for _ in range(a.block):
                if step[k] >= total:
                    break
                x, y = batch(step[k])
                t0 = time.perf_counter()
                train_step(net, opts[k], x, y)
                if k == "sync":
                    dist.barrier(group=gw_group)
                t1 = time.perf_counter()
                if step[k] >= a.warmup:
                    times[k].append(t1 - t0)
                step[k] += 1
            # The plain block has no collective: meet before the next one
            # so that the DDP blocks do not absorb the ranks' drift.
            dist.barrier()
    for k in nets:
        worst = torch.tensor([statistics.median(times[k])], dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"RESULT impl=pytorch mode=paired net={k} model={a.model} world={world} "
                  f"batch={a.batch} warmup={a.warmup} steps={a.steps} block={a.block} "
                  f"threads={a.threads} step_ms={worst.item() * 1e3:.4f} torch={torch.__version__}",
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["ddp", "plain", "paired"], default="ddp")
    ap.add_argument("--block", type=int, default=5, help="paired: steps per mode in turn")
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--backend", choices=["gloo", "gradwire"], default="gloo")
    ap.add_argument("--model", choices=["cnn", "transformer"], default="cnn")
    a = ap.parse_args()
    if a.backend == "gradwire" or a.mode == "paired":
        import gradwire.torch  # noqa: F401 - registers the backend

    rank, world = torchrun_env_from_mpirun("29531")
    if a.mode == "paired":
        return paired(a, rank, world)
    ddp_mode = a.mode == "ddp"
    # The plain baseline creates no process group (no gloo threads).
    if ddp_mode:
        dist.init_process_group(a.backend)
    torch.set_num_threads(a.threads)  # 1: two ranks on two cores, no oversubscription
    torch.manual_seed(1 + rank)  # DDP's broadcast makes the replicas equal

    model = make_model(a)
    batch = make_batches(a, rank, world)
    net = nn.parallel.DistributedDataParallel(model) if ddp_mode else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)

    step_s = []
    for s in range(a.warmup + a.steps):
        x, y = batch(s)
        t0 = time.perf_counter()
        train_step(net, optimizer, x, y)  # with DDP: gradients averaged when backward returns
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
        print(f"RESULT impl=pytorch backend={a.backend} model={a.model} mode={a.mode} world={world} rank={rank} batch={a.batch} "
              f"warmup={a.warmup} steps={a.steps} threads={a.threads} step_ms={med * 1e3:.4f}"
              f"{extra} torch={torch.__version__}", flush=True)
    if ddp_mode:
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
