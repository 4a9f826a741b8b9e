"""Every collective through torch.distributed with backend="gradwire",
compared with the gloo backend's results on the same inputs.

Run under torchrun or mpirun (launched by test_torch_backend.py). The
default group is gradwire's; a gloo group over the same ranks computes the
reference. Inputs are small integers, so every dtype (float16/bfloat16
included) sums exactly and results must match bit for bit; avg, which gloo
lacks, is checked against sum / world. Exits non-zero on the first mismatch.
Arguments "modes" and "errors" then run modes_worker.py's and
errors_worker.py's checks in the same process group.
"""
import sys

import torch
import torch.distributed as dist

import gradwire
import gradwire.torch  # noqa: F401 - registers backend "gradwire"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.int8, torch.bool]
SIZES = [0, 1, 7, 1000, 70001]  # 70001 float32 > 64 KiB: the ring algorithms
OPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
       "prod": dist.ReduceOp.PRODUCT}


def values(n, rank, dtype, op="sum", salt=0):
    i = torch.arange(n, dtype=torch.int64)
    if op == "prod":
        v = i % 2 + 1  # products stay exact in bfloat16 for 3 ranks
    else:
        v = (i * 7 + salt) % 5 + 1 + (i + rank) % 3 * (rank + 1)
    return v.to(dtype)


def check(name, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        bad = (got.double() - want.double()).abs().argmax().item() if got.numel() else -1
        raise AssertionError(f"rank {dist.get_rank()}: {name}: gradwire {got.flatten()[:8]} ... "
                             f"!= gloo {want.flatten()[:8]} ... (first differing index ~{bad})")


def run(group_gw, group_gloo, label):
    rank = dist.get_rank(group_gw)
    world = dist.get_world_size(group_gw)
    for dtype in DTYPES:
        for n in SIZES:
            tag = f"{label} {dtype} n={n}"
            for opname, op in OPS.items():
                a = values(n, rank, dtype, opname)
                b = a.clone()
                dist.all_reduce(a, op=op, group=group_gw)
                dist.all_reduce(b, op=op, group=group_gloo)
                check(f"all_reduce {opname} {tag}", a, b)
            # avg: gloo has no AVG; sum / world, truncated for integers.
            # An average of booleans is refused (gradwire/types.h).
            a = values(n, rank, dtype)
            if dtype == torch.bool:
                try:
                    dist.all_reduce(a, op=dist.ReduceOp.AVG, group=group_gw)
                    raise AssertionError(f"avg of bool was not refused ({tag})")
                except ValueError:
                    pass
            else:
                s = a.clone()
                dist.all_reduce(a, op=dist.ReduceOp.AVG, group=group_gw)
                dist.all_reduce(s, op=dist.ReduceOp.SUM, group=group_gloo)
                if dtype.is_floating_point:
                    want = (s.double() / world).to(dtype)
                    torch.testing.assert_close(a, want, rtol=1e-2, atol=1e-2, msg=f"avg {tag}")
                else:
                    check(f"all_reduce avg {tag}", a, torch.div(s, world, rounding_mode="trunc"))

            # broadcast from every root
            for root in range(world):
                a = values(n, rank, dtype, salt=root)
                b = a.clone()
                dist.broadcast(a, group_src=root, group=group_gw)
                dist.broadcast(b, group_src=root, group=group_gloo)
                check(f"broadcast root={root} {tag}", a, b)

            # all_gather (list) and all_gather_into_tensor: n per rank
            x = values(n, rank, dtype)
            outs_gw = [torch.full((n,), 9, dtype=dtype) for _ in range(world)]
            outs_gl = [torch.full((n,), 9, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs_gw, x, group=group_gw)
            dist.all_gather(outs_gl, x, group=group_gloo)
            for r in range(world):
                check(f"all_gather[{r}] {tag}", outs_gw[r], outs_gl[r])
            flat = torch.empty(n * world, dtype=dtype)
            dist.all_gather_into_tensor(flat, x, group=group_gw)
            check(f"all_gather_into_tensor {tag}", flat, torch.cat(outs_gl))

            # reduce_scatter_tensor and reduce_scatter (list): n per rank.
            # Reference: gloo all_reduce of the whole input, this rank's slice.
            full = values(n * world, rank, dtype)
            ref = full.clone()
            dist.all_reduce(ref, group=group_gloo)
            ref = ref[rank * n:(rank + 1) * n]
            out = torch.full((n,), 9, dtype=dtype)
            dist.reduce_scatter_tensor(out, full, group=group_gw)
            check(f"reduce_scatter_tensor {tag}", out, ref)
            out2 = torch.full((n,), 9, dtype=dtype)
            dist.reduce_scatter(out2, list(full.chunk(world)) if n else
                                [torch.empty(0, dtype=dtype)] * world, group=group_gw)
            check(f"reduce_scatter {tag}", out2, ref)

            # all_to_all_single (equal splits) and all_to_all (lists)
            send = values(n * world, rank, dtype, salt=3)
            got = torch.full((n * world,), 9, dtype=dtype)
            want = torch.full((n * world,), 9, dtype=dtype)
            dist.all_to_all_single(got, send, group=group_gw)
            dist.all_to_all_single(want, send, group=group_gloo)
            check(f"all_to_all_single {tag}", got, want)
            ins = list(send.chunk(world)) if n else [torch.empty(0, dtype=dtype)] * world
            outs = [torch.full((n,), 9, dtype=dtype) for _ in range(world)]
            dist.all_to_all(outs, ins, group=group_gw)
            check(f"all_to_all {tag}", torch.cat(outs), want)
    dist.barrier(group=group_gw)


def main():
    # Optional arguments: more checks in the same process group after these
    # (a Python start with torch costs seconds of CPU, more than a check):
    # "modes" (modes_worker.py), "errors" (errors_worker.py, at 2 ranks or
    # more; it shuts the communicators down, so it comes last).
    extra = sys.argv[1:]
    assert set(extra) <= {"modes", "errors"} and "errors" not in extra[:-1], extra
    dist.init_process_group(backend="gradwire")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    run(dist.group.WORLD, gloo, "world")

    # Sub-groups: every rank creates every group (as torch requires), only
    # members use it. [0, last] skips the middle rank at world 3; [last] is
    # a group of one; [last, 0] lists them in reverse (torch sorts them).
    for ranks in (sorted({0, world - 1}), [world - 1], sorted({world - 1, 0}, reverse=True)):
        g = dist.new_group(ranks, backend="gradwire")
        r = dist.new_group(ranks, backend="gloo")
        if rank in ranks:
            assert dist.get_world_size(g) == len(set(ranks))
            run(g, r, f"group {ranks}")
    dist.barrier()
    print(f"rank {rank}: collectives_worker OK (world {world})", flush=True)
    if "modes" in extra:
        import modes_worker
        modes_worker.check(gloo)
    if "errors" in extra:
        import errors_worker
        errors_worker.check(gloo)  # destroys the process group
    else:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
