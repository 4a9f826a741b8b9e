"""gradwire.torch.optim's 1-bit Adam and LAMB on CUDA parameters against the
same optimizers on CPU parameters, same model, batches and options
(test_onebit.py::test_onebit_cuda; ranks may share one GPU on the staged
path). At world size 1 Adam exchanges nothing and every formula is shared
element math, so the parameters must be the same bits; otherwise (1-bit
scales, LAMB's norms summed in another order) within rounding.
Prints "rank R: OK" on success."""
import torch

import gradwire
from gradwire.torch.optim import OneBitAdam, OneBitLamb


def model(device):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    return net.to(device)


def batch(rank, step, device):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x, y = torch.randn(16, 20, generator=g), torch.randint(0, 4, (16,), generator=g)
    return x.to(device), y.to(device)


def run(make, comm, device, rank, steps):
    net = model(device)
    opt = make(net.parameters(), comm)
    for s in range(steps):
        x, y = batch(rank, s, device)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    torch.cuda.synchronize()
    return [p.detach().cpu() for p in net.parameters()], opt


def main():
    comm = gradwire.Communicator.create()
    rank, world = comm.rank(), comm.size()
    cuda = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(cuda)
    for name, make in [
            ("adam", lambda ps, c: OneBitAdam(ps, c, lr=1e-2, freeze_step=3, weight_decay=0.01)),
            ("lamb", lambda ps, c: OneBitLamb(ps, c, lr=1e-2, freeze_step=3))]:
        on_cpu, _ = run(make, comm, torch.device("cpu"), rank, 6)
        on_gpu, opt = run(make, comm, cuda, rank, 6)
        for a, b in zip(on_gpu, on_cpu):
            if name == "adam" and world == 1:
                assert torch.equal(a, b), f"{name}: CUDA and CPU differ at world size 1"
            else:
                assert torch.allclose(a, b, rtol=0, atol=1e-4 * max(1.0, b.abs().max().item())), \
                    f"{name}: CUDA and CPU differ by {(a - b).abs().max().item()}"
        # The state saved on the GPU loads into a CPU optimizer.
        cpu_opt = make(model("cpu").parameters(), comm)
        cpu_opt.load_state_dict(opt.state_dict())
    print(f"rank {rank}: OK", flush=True)


if __name__ == "__main__":
    main()
