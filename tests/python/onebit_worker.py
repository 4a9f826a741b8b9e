"""gradwire.torch.optim's 1-bit Adam/LAMB on N ranks (test_onebit.py):
  * the warm-up equals torch.optim.Adam on the averaged gradient;
  * after the freeze, replicas stay bit-identical and the loss falls;
  * state_dict() / load_state_dict() continue bit for bit;
  * the flat C++ binding (gradwire.OneBitAdam) gives the same bits as the
    optimizer (the optimizer is only a view of it).
Prints "rank R: OK" on success."""
import copy
import hashlib

import torch

import gradwire
from gradwire import _C
from gradwire.torch.optim import OneBitAdam, OneBitLamb


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 20, generator=g), torch.randint(0, 4, (16,), generator=g)


def train(net, opt, rank, steps, first=0):
    losses = []
    for s in range(first, first + steps):
        x, y = batch(rank, s)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def digest(net):
    h = hashlib.sha256()
    for p in net.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()


def same_everywhere(comm, net):
    d = torch.frombuffer(bytearray(bytes.fromhex(digest(net))), dtype=torch.uint8)
    everyone = torch.zeros(32 * comm.size, dtype=torch.uint8)
    comm.allgather(d, everyone).wait()
    return all(bytes(everyone[32 * r:32 * r + 32].numpy()) == bytes(d.numpy()) for r in range(comm.size))


def main():
    comm = gradwire.Communicator.create(timeout=60)
    rank, world = comm.rank, comm.size

    # 1. Warm-up == torch.optim.Adam on the averaged gradient.
    net, ref = model(), model()
    opt = OneBitAdam(net.parameters(), comm, lr=1e-2, freeze_step=1000)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2, foreach=False)
    for s in range(5):
        train(net, opt, rank, 1, first=s)
        ref_opt.zero_grad()
        grads = None
        for r in range(world):  # every rank's gradient, computed locally
            x, y = batch(r, s)
            ref.zero_grad()
            torch.nn.functional.cross_entropy(ref(x), y).backward()
            g = [p.grad.clone() / world for p in ref.parameters()]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        for p, g in zip(ref.parameters(), grads):
            p.grad = g
        ref_opt.step()
        for a, b in zip(net.parameters(), ref.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)

    # 2. Compression stage: identical replicas, the loss falls.
    for cls in (OneBitAdam, OneBitLamb):
        net = model()
        opt = cls(net.parameters(), comm, freeze_step=10)
        losses = train(net, opt, rank, 80)
        assert opt.core.compressing, cls.__name__
        assert same_everywhere(comm, net), f"{cls.__name__}: replicas differ"
        first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
        assert last < first, f"{cls.__name__}: loss {first:.3f} -> {last:.3f}"
        if world > 1:
            assert opt.core.last_wire_bytes > 0

    # 3. Save at step 25, load into a new optimizer, continue: bit-identical.
    straight, net = model(), model()
    o1 = OneBitAdam(straight.parameters(), comm, freeze_step=10)
    train(straight, o1, rank, 40)
    o2 = OneBitAdam(net.parameters(), comm, freeze_step=10)
    train(net, o2, rank, 25)
    saved_params, saved_state = copy.deepcopy(net.state_dict()), o2.state_dict()
    resumed = model()
    resumed.load_state_dict(saved_params)
    o3 = OneBitAdam(resumed.parameters(), comm, freeze_step=10)
    o3.load_state_dict(saved_state)
    train(resumed, o3, rank, 15, first=25)
    assert digest(resumed) == digest(straight), "resume is not bit-identical"

    # 4. The flat binding is the same computation.
    net = model()
    params = [p for p in net.parameters()]
    n = sum(p.numel() for p in params)
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    core = _C.OneBitAdam(comm, n, freeze_step=3)
    opt = OneBitAdam(model().parameters(), comm, freeze_step=3)
    for s in range(8):
        x, y = batch(rank, s)
        for p in params:
            p.grad = None
        at = 0
        with torch.no_grad():
            for p in params:
                p.copy_(flat[at:at + p.numel()].view_as(p))
                at += p.numel()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        grad = torch.cat([p.grad.reshape(-1) for p in params])
        core.step(flat, grad, 1e-3)
    mine = model()
    opt = OneBitAdam(mine.parameters(), comm, freeze_step=3)
    train(mine, opt, rank, 8)
    torch.testing.assert_close(torch.cat([p.detach().reshape(-1) for p in mine.parameters()]), flat,
                               rtol=0, atol=0)
    print(f"rank {rank}: OK", flush=True)


if __name__ == "__main__":
    main()
