"""gradwire's powerSGD_hook under torch's DDP with backend="gradwire"
(run by ddp_worker.py --powersgd on 2-3 ranks in test_ddp.py, or alone):

 * full rank (matrix_approximation_rank >= every matrix's smaller side,
   min_compression_rate 0 so everything is compressed) on a regression MLP
   whose gradient matrices have full rank (a classifier's would not: its
   logit gradients sum to zero): P Q^T reproduces the bucket, so after each
   step every gradient must equal the exact average of the ranks' gradients
   (an allreduce of the same gradients) -- the hook's division, bucket
   shapes and futures;
 * rank 2 with start_powerSGD_iter 3: plain averaging for three steps, then
   compression; the replicas stay bit-identical, compression_stats reports
   the ratio, a state_dict() round trip restores the state, and training
   lowers the loss.
"""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import gradwire.torch  # noqa: F401
from gradwire.torch import hooks


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3)
        self.fc1 = nn.Linear(6 * 6 * 6, 40)
        self.fc2 = nn.Linear(40, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def batches(rank, steps):
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(16, 1, 14, 14, generator=g), torch.randint(0, 10, (16,), generator=g))
            for _ in range(steps)]


class Regression(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 16)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def exact_average_check(rank, world):
    torch.manual_seed(0)
    model = Regression()
    ddp = DDP(model, bucket_cap_mb=0.001)  # several buckets
    state = hooks.PowerSGDState(None, matrix_approximation_rank=64, start_powerSGD_iter=0,
                                min_compression_rate=0)
    ddp.register_comm_hook(state, hooks.powerSGD_hook)
    reference = Regression()
    reference.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(7 + rank)
    for _ in range(3):
        x, t = torch.randn(64, 32, generator=g), torch.randn(64, 8, generator=g)
        model.zero_grad()
        F.mse_loss(ddp(x), t).backward()
        reference.zero_grad()
        F.mse_loss(reference(x), t).backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            expected = q.grad.clone()
            dist.all_reduce(expected)
            expected /= world
            err = (p.grad - expected).abs().max().item()
            scale = expected.abs().max().item()
            assert err <= 1e-4 * max(scale, 1e-3), f"rank {rank}: |grad - average| = {err} (max {scale})"
        with torch.no_grad():  # the same update keeps the two models equal
            for p, q in zip(model.parameters(), reference.parameters()):
                p -= 0.1 * p.grad
                q.copy_(p)
    rate, before, after = state.compression_stats()
    assert before > 0 and after > 0, state.compression_stats()


def low_rank_training(rank, world):
    torch.manual_seed(1)
    model = Net()
    ddp = DDP(model, bucket_cap_mb=0.02)
    state = hooks.PowerSGDState(None, matrix_approximation_rank=2, start_powerSGD_iter=3)
    ddp.register_comm_hook(state, hooks.powerSGD_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = batches(rank, 1)[0]
    losses = []
    for step in range(25):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(data[0]), data[1])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step == 10:
            saved = state.state_dict()
            state.load_state_dict(saved)
            assert state.state_dict() == saved
    assert state.iter == 25, state.iter
    rate, before, after = state.compression_stats()
    assert rate > 2, state.compression_stats()
    assert losses[-1] < 0.8 * losses[0], losses
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    for r, other in enumerate(gathered):
        assert torch.equal(other, flat), f"rank {rank}: replica of rank {r} differs"
    return rate


def check(rank, world):
    """Every check above on the default (gradwire) group."""
    exact_average_check(rank, world)
    rate = low_rank_training(rank, world)
    # A group on another backend is refused with the reason.
    gloo = dist.new_group(backend="gloo")
    try:
        hooks.powerSGD_hook(hooks.PowerSGDState(gloo), None)
        raise AssertionError("powerSGD_hook ran on a gloo group")
    except TypeError as e:
        assert "gradwire" in str(e), e
    dist.barrier()
    print(f"rank {rank}: powersgd_worker OK (compression {rate:.1f}x)", flush=True)


def main():
    dist.init_process_group(backend="gradwire")
    check(dist.get_rank(), dist.get_world_size())
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
