"""A small DDP training with backend="gradwire" matches the same training
over gloo. Run under torchrun or mpirun (test_ddp.py).

Two replicas of the same CNN train side by side in each process on the same
Fashion-MNIST batches (Debian's dataset-fashion-mnist; a synthetic set of the
same shape if it is missing): one under DDP over the default (gradwire)
group, one under DDP over a gloo group. After the steps, their parameters
must agree within tolerance (both average the same gradients in float32; the
sums may associate differently). --hook fp16/bf16 runs gradwire's compress
hook on the gradwire replica and torch's own hook on the gloo replica.
Several --hook values train one after another in the same process group;
--powersgd then runs powersgd_worker.py's checks.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import gradwire.torch
from gradwire.torch import hooks

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from fashion_mnist import DATA, load_train  # noqa: E402


def load(n):
    if os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        images, labels = load_train(DATA, n)
        return images, labels, "fashion-mnist"
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g), "synthetic"


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hook", choices=["none", "fp16", "bf16"], nargs="+", default=["none"],
                    help="one training per hook, in order, in one process group")
    ap.add_argument("--powersgd", action="store_true",
                    help="then powersgd_worker.py's checks, in the same process group")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(backend="gradwire")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    # Several checks per launch: a Python start with torch costs seconds of
    # CPU, more than a check. Each prints its own OK line.
    for hook in a.hook:
        train_and_compare(hook, a.steps, a.batch, gloo, rank, world)
    if a.powersgd:
        import powersgd_worker
        powersgd_worker.check(rank, world)
    dist.destroy_process_group()
    return 0


def train_and_compare(hook, steps, batch, gloo, rank, world):
    torch.manual_seed(1 + rank)  # different on purpose: DDP broadcasts rank 0's
    base = Cnn()
    model_gw, model_gl = Cnn(), Cnn()
    model_gw.load_state_dict(base.state_dict())
    model_gl.load_state_dict(base.state_dict())
    # Small buckets so several run per step, overlapping backward.
    ddp_gw = DDP(model_gw, bucket_cap_mb=0.05)
    ddp_gl = DDP(model_gl, bucket_cap_mb=0.05, process_group=gloo)
    if hook == "fp16":
        ddp_gw.register_comm_hook(None, hooks.fp16_compress_hook)
        ddp_gl.register_comm_hook(gloo, default_hooks.fp16_compress_hook)
    elif hook == "bf16":
        ddp_gw.register_comm_hook(None, hooks.bf16_compress_hook)
        ddp_gl.register_comm_hook(gloo, default_hooks.bf16_compress_hook)
    opt_gw = torch.optim.SGD(model_gw.parameters(), lr=0.05)
    opt_gl = torch.optim.SGD(model_gl.parameters(), lr=0.05)

    images, labels, source = load(steps * batch * world)
    for s in range(steps):
        first = (s * world + rank) * batch
        x, y = images[first:first + batch], labels[first:first + batch]
        for net, opt in ((ddp_gw, opt_gw), (ddp_gl, opt_gl)):
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()

    worst = 0.0
    for (name, p), q in zip(model_gw.named_parameters(), model_gl.parameters()):
        worst = max(worst, (p - q).abs().max().item())
        # fp16/bf16: both round the same values; allow the reductions to differ
        # in the last bit of a few elements.
        tol = {"none": 1e-5, "fp16": 1e-3, "bf16": 1e-2}[hook]
        torch.testing.assert_close(p, q, rtol=tol, atol=tol,
                                   msg=lambda m: f"rank {rank}: {name} ({hook}): {m}")
    # Replicas agree across ranks, bit for bit.
    flat = torch.cat([p.detach().flatten() for p in model_gw.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, group_src=0)
    assert torch.equal(flat, ref), f"rank {rank}: gradwire replicas diverged"
    print(f"rank {rank}: ddp_worker hook {hook} OK ({source}, world {world}, {steps} steps, "
          f"max |gradwire - gloo| = {worst:.3g})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
