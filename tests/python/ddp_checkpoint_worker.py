"""Unsharded torch DDP (backend "gradwire", torch.optim.Adam) to
gradwire.torch.ShardedDataParallel and back through sharded checkpoints
(gradwire.torch.sharded.save_ddp_checkpoint / load_ddp_checkpoint;
test_ddp_checkpoint.py launches it, twice: each launch costs a Python and
torch start per rank). Modes:

  ddp_save DIR   DDP trains steps 0-2, saves step 3 in DIR/a.
  continue DIR   at another world size: stage 2 loads DIR/a, trains steps
                 3-5, is compared with the uninterrupted run and saves step 6
                 in DIR/b; then a DDP module loads DIR/b (every shard, whole),
                 trains steps 6-8 and is compared; an SGD optimizer loading
                 DIR/b (Adam's state) raises gradwire.InvalidArgumentError
                 on every rank.

The uninterrupted run: one process, the whole batch, torch.optim.Adam.
Tolerance 1e-5 (atol and rtol) on float32 parameters after 6 or 9 steps of
lr 1e-2: the ranks' mean losses average to the global mean up to rounding,
and the engine's Adam rounds torch's formula in another order (a few ulps
of each update); the largest difference is printed.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import gradwire
import gradwire.torch
from gradwire.torch import ShardedDataParallel, sharded

RANK = WORLD = 0
GLOBAL_BATCH = 6  # divisible by 1, 2 and 3
LR = 1e-2


def log(msg):
    print(f"\nrank {RANK}: {msg}", flush=True)


def make_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))


def batch(step, whole=False):
    g = torch.Generator().manual_seed(1000 * step)
    x = torch.randn(GLOBAL_BATCH, 6, generator=g)
    y = torch.randn(GLOBAL_BATCH, 3, generator=g)
    if whole:
        return x, y
    per = GLOBAL_BATCH // WORLD
    return x[RANK * per:(RANK + 1) * per], y[RANK * per:(RANK + 1) * per]


def loss_of(model, step, whole=False):
    x, y = batch(step, whole)
    return ((model(x) - y) ** 2).mean()


def uninterrupted(steps):
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    for s in range(steps):
        opt.zero_grad()
        loss_of(model, s, whole=True).backward()
        opt.step()
    return model


def compare(model, steps):
    want = dict(uninterrupted(steps).named_parameters())
    worst = 0.0
    for name, p in model.named_parameters():
        w = want[name].detach()
        worst = max(worst, (p.detach() - w).abs().max().item())
        torch.testing.assert_close(p.detach(), w, atol=1e-5, rtol=1e-5, msg=name)
    return worst


def ddp_train(model, opt, steps):
    ddp = DDP(model)
    for s in steps:
        opt.zero_grad()
        loss_of(ddp, s).backward()
        opt.step()
    return ddp


def main():
    global RANK, WORLD
    dist.init_process_group(backend="gradwire")
    RANK, WORLD = dist.get_rank(), dist.get_world_size()
    mode, root = sys.argv[1], sys.argv[2]
    if mode == "ddp_save":
        model = make_model()
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        ddp = ddp_train(model, opt, range(3))
        sharded.save_ddp_checkpoint(ddp, opt, os.path.join(root, "a"), 3)
        log(f"DDP saved at {WORLD} ranks; ddp save OK")
    elif mode == "continue":
        model = make_model(seed=7)  # other weights: the checkpoint must replace them
        sdp = ShardedDataParallel(model, stage=2, optimizer=sharded.Adam(lr=LR),
                                  bucket_cap_mb=64 / 2**20, first_bucket_cap_mb=32 / 2**20,
                                  alignment=4)
        assert sdp.load_checkpoint(os.path.join(root, "a")) == 3
        assert sdp.optimizer_steps == 3
        for s in range(3, 6):
            loss_of(sdp, s).backward()
            assert sdp.step()
        sdp.gather_all()
        worst = compare(model, 6)
        sdp.save_checkpoint(os.path.join(root, "b"), 6)
        sdp.close()
        log(f"DDP at 2 ranks -> stage 2 at {WORLD} ranks, max |diff| {worst:.3e}")

        model = make_model(seed=8)
        opt = torch.optim.Adam(model.parameters(), lr=LR)
        assert sharded.load_ddp_checkpoint(model, opt, os.path.join(root, "b")) == 6
        assert all(int(opt.state[p]["step"]) == 6 for p in model.parameters())
        ddp_train(model, opt, range(6, 9))
        worst = compare(model, 9)
        sgd = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
        try:
            sharded.load_ddp_checkpoint(model, sgd, os.path.join(root, "b"))
            raise AssertionError(f"rank {RANK}: Adam's state loaded into SGD")
        except gradwire.InvalidArgumentError as e:
            assert "holds the state of optimizer 'adam'" in str(e), e
        log(f"stage 2 -> DDP at {WORLD} ranks, max |diff| {worst:.3e}; ddp continue OK")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
