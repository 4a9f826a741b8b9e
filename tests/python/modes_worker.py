"""Collectives with list outputs under torch.inference_mode() and
torch.no_grad(), and a Work whose copy-out fails (issue: silent wrong
results under inference_mode; Note [copy-out in the caller's mode] in
src/torch/c10d_work.cpp). Run by collectives_worker.py's launches at
world sizes 2 and 3 (test_torch_backend.py), or alone.

 * all_gather and all_to_all (the backend gathers into one buffer and copies
   into the caller's list on its engine thread) and reduce_scatter (list of
   inputs), with outputs made inside each mode, blocking and async (wait(),
   then the future's value), compared with gloo under the same mode;
 * outputs that cannot be written (leaf tensors that require grad, outside
   no_grad): gloo raises; gradwire must raise from wait() and from the
   future on every rank, not return the stale outputs.
"""
import contextlib
import sys

import torch
import torch.distributed as dist

import gradwire.torch  # noqa: F401 - registers backend "gradwire"

MODES = {"inference_mode": torch.inference_mode, "no_grad": torch.no_grad,
         "grad": contextlib.nullcontext}
DTYPES = [torch.float32, torch.int64, torch.bfloat16]
SIZES = [1, 5, 70001]  # 70001 float32 > 64 KiB: the ring algorithms


def inputs(n, rank, world, dtype, salt):
    return [((torch.arange(n) * 3 + salt + 7 * rank + 11 * j) % 13).to(dtype)
            for j in range(world)]


def same(name, got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if not torch.equal(g, w):
            raise AssertionError(f"rank {dist.get_rank()}: {name}: output {i}: gradwire "
                                 f"{g.flatten()[:6].tolist()} != gloo {w.flatten()[:6].tolist()}")


def run_mode(mode, gloo, rank, world):
    for it in range(4):
        for dtype in DTYPES:
            for n in SIZES:
                tag = f"{mode} {dtype} n={n} iteration {it}"
                with MODES[mode]():
                    ins = inputs(n, rank, world, dtype, it)
                    # all_gather: blocking, then async (wait, then the future).
                    got = [torch.zeros(n, dtype=dtype) for _ in range(world)]
                    want = [torch.zeros(n, dtype=dtype) for _ in range(world)]
                    dist.all_gather(got, ins[0])
                    dist.all_gather(want, ins[0], group=gloo)
                    same(f"all_gather {tag}", got, want)
                    got = [torch.zeros(n, dtype=dtype) for _ in range(world)]
                    work = dist.all_gather(got, ins[1], async_op=True)
                    work.wait()
                    dist.all_gather(want, ins[1], group=gloo)
                    same(f"all_gather async {tag}", got, want)
                    same(f"all_gather future {tag}", work.get_future().wait(), want)
                    # all_to_all (list in, list out).
                    got = [torch.zeros(n, dtype=dtype) for _ in range(world)]
                    want = [torch.zeros(n, dtype=dtype) for _ in range(world)]
                    work = dist.all_to_all(got, ins, async_op=True)
                    work.wait()
                    dist.all_to_all(want, ins, group=gloo)
                    same(f"all_to_all {tag}", got, want)
                    # reduce_scatter (list in, one out): sums stay exact.
                    if dtype != torch.bfloat16:
                        got = torch.zeros(n, dtype=dtype)
                        want = torch.zeros(n, dtype=dtype)
                        dist.reduce_scatter(got, ins)
                        dist.reduce_scatter(want, ins, group=gloo)
                        same(f"reduce_scatter {tag}", [got], [want])


def failing_copy_out(gloo, rank, world):
    """Outputs autograd forbids writing in place: every part of the Work must fail."""
    for group, name in ((gloo, "gloo"), (None, "gradwire")):
        outs = [torch.zeros(4, requires_grad=True) for _ in range(world)]
        try:
            work = dist.all_gather(outs, torch.ones(4), group=group, async_op=True)
            work.wait()
        except RuntimeError as e:
            assert "in-place" in str(e), f"rank {rank}: {name}: unexpected error {e}"
        else:
            raise AssertionError(f"rank {rank}: {name}: all_gather into leaf tensors that require "
                                 f"grad returned from wait() without an error (outputs "
                                 f"{[o.detach().tolist() for o in outs]})")
        if name == "gradwire":
            assert not work.is_success(), f"rank {rank}: is_success() after a failed copy-out"
            assert work.exception() is not None, f"rank {rank}: exception() is None"
            try:
                work.get_future().wait()
            except RuntimeError:
                pass
            else:
                raise AssertionError(f"rank {rank}: the future completed without the error")
    # The group is still usable afterwards.
    t = torch.ones(3)
    dist.all_reduce(t)
    assert t.tolist() == [float(world)] * 3, t


def check(gloo):
    """Every check above on the default (gradwire) group; `gloo` spans the same ranks."""
    rank, world = dist.get_rank(), dist.get_world_size()
    for mode in MODES:
        run_mode(mode, gloo, rank, world)
    failing_copy_out(gloo, rank, world)
    dist.barrier()
    print(f"rank {rank}: modes OK", flush=True)


def main():
    dist.init_process_group(backend="gradwire")
    check(dist.new_group(backend="gloo"))
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
