"""CUDA tensors through torch.distributed with backend="gradwire" (Note [CUDA
tensors in the backend]): every collective against its expected values, with
the inputs produced on a side stream right before the call (a GPU sleep first,
so a collective that did not follow the stream would read stale values), then
DDP on a CUDA model against one model trained on the whole batch.

Run under torchrun by test_torch_backend.py: one rank per GPU on the NCCL
path, or ranks sharing a GPU with GRADWIRE_DEVICE_PATH=staged. Prints OK.
"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import gradwire.torch  # noqa: F401 - registers backend "gradwire"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8]
SIZES = [0, 1, 7, 1000, 70001]


def values(n, rank, dtype, device, salt=0):
    i = torch.arange(n, dtype=torch.int64, device=device)
    return ((i * 7 + salt) % 5 + 1 + (i + rank) % 3 * (rank + 1)).to(dtype)


def delayed(t):
    """t, made final on the current stream only after a GPU sleep."""
    torch.cuda._sleep(2_000_000)  # ~1 ms of GPU time on the current stream
    return t.clone()


def check(name, got, want):
    if not torch.equal(got.cpu(), want.cpu()):
        raise AssertionError(f"rank {dist.get_rank()}: {name}: {got.flatten()[:8].tolist()} != "
                             f"{want.flatten()[:8].tolist()}")


def collectives(rank, world, dev):
    side = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(side):
        for dtype in DTYPES:
            for n in SIZES:
                tag = f"{dtype} n={n}"
                x = delayed(values(n, rank, dtype, dev))
                dist.all_reduce(x)
                want = sum(values(n, r, torch.int64, dev) for r in range(world)).to(dtype)
                check(f"all_reduce {tag}", x, want)

                root = world - 1
                x = delayed(values(n, rank, dtype, dev, salt=1))
                dist.broadcast(x, src=root)
                check(f"broadcast {tag}", x, values(n, root, dtype, dev, salt=1))

                x = delayed(values(n, rank, dtype, dev))
                out = torch.empty(n * world, dtype=dtype, device=dev)
                dist.all_gather_into_tensor(out, x)
                check(f"all_gather_into_tensor {tag}", out,
                      torch.cat([values(n, r, dtype, dev) for r in range(world)]))

                outs = [torch.empty(n, dtype=dtype, device=dev) for _ in range(world)]
                dist.all_gather(outs, x)
                for r in range(world):
                    check(f"all_gather[{r}] {tag}", outs[r], values(n, r, dtype, dev))

                big = delayed(values(n * world, rank, dtype, dev))
                out = torch.empty(n, dtype=dtype, device=dev)
                dist.reduce_scatter_tensor(out, big)
                full = sum(values(n * world, r, torch.int64, dev) for r in range(world)).to(dtype)
                check(f"reduce_scatter_tensor {tag}", out, full[rank * n:(rank + 1) * n])

                send = delayed(values(n * world, rank, dtype, dev, salt=2))
                recv = torch.empty_like(send)
                dist.all_to_all_single(recv, send)
                want = torch.cat([values(n * world, r, dtype, dev, salt=2)[rank * n:(rank + 1) * n]
                                  for r in range(world)])
                check(f"all_to_all_single {tag}", recv, want)

        # Asynchronous work and its future.
        x = delayed(torch.full((1 << 20,), float(rank + 1), device=dev))
        work = dist.all_reduce(x, async_op=True)
        fut = work.get_future().then(lambda f: f.value()[0] * 2)
        got = fut.wait()
        check("future", got, torch.full((1 << 20,), float(world * (world + 1)), device=dev))
        dist.barrier()


def ddp(rank, world, dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 8)).to(dev)
    reference = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                                    torch.nn.Linear(64, 8)).to(dev)
    reference.load_state_dict(model.state_dict())
    wrapped = DDP(model, device_ids=[dev], bucket_cap_mb=0.004)  # several buckets
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    per_rank = 8
    for step in range(5):
        g = torch.Generator().manual_seed(100 + step)
        x = torch.randn(per_rank * world, 32, generator=g).to(dev)
        y = torch.randn(per_rank * world, 8, generator=g).to(dev)
        opt.zero_grad()
        torch.nn.functional.mse_loss(wrapped(x[rank * per_rank:(rank + 1) * per_rank]),
                                     y[rank * per_rank:(rank + 1) * per_rank]).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if not torch.allclose(p, q, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"rank {rank}: DDP parameter {name} differs from the reference by "
                                 f"{(p - q).abs().max().item()}")


def main():
    dist.init_process_group("gradwire")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    collectives(rank, world, dev)
    ddp(rank, world, dev)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: OK", flush=True)


if __name__ == "__main__":
    main()
