"""The direct API on numpy arrays (and torch tensors through DLPack), under
mpirun or torchrun (test_direct.py). Checks every collective against values
computed locally, a split, Work.wait(timeout)/test(), Ctrl-C during a wait,
and the error mapping. Exits non-zero on the first failure.
"""
import signal
import sys
import threading
import time

import numpy as np

import gradwire

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8]
SIZES = [0, 1, 7, 1000, 70001]


def vals(n, rank, dtype):
    return (((np.arange(n) * 7) % 5 + 1 + rank) % 11).astype(dtype)


def collectives(comm):
    rank, world = comm.rank, comm.size
    for dtype in DTYPES:
        for n in SIZES:
            tag = f"{np.dtype(dtype).name} n={n}"
            total = sum(vals(n, r, np.int64) for r in range(world)) if n else np.zeros(0, np.int64)
            a = vals(n, rank, dtype)
            comm.allreduce(a).wait()
            np.testing.assert_array_equal(a, total.astype(dtype), err_msg=f"allreduce {tag}")
            out = np.zeros(n, dtype)
            comm.allreduce(vals(n, rank, dtype), out, op="max").wait()
            want = np.max([vals(n, r, np.int64) for r in range(world)], axis=0) if n else out
            np.testing.assert_array_equal(out, np.asarray(want).astype(dtype), err_msg=f"max {tag}")

            # reduce_scatter / allgather: n need not divide by world
            cnt, off = gradwire.shard_count(n, world, rank), gradwire.shard_offset(n, world, rank)
            shard = np.zeros(cnt, dtype)
            comm.reduce_scatter(vals(n, rank, dtype), shard).wait()
            np.testing.assert_array_equal(shard, total[off:off + cnt].astype(dtype),
                                          err_msg=f"reduce_scatter {tag}")
            full = np.zeros(n, dtype)
            comm.allgather(shard, full).wait()
            np.testing.assert_array_equal(full, total.astype(dtype), err_msg=f"allgather {tag}")

            b = vals(n, rank, dtype)
            comm.broadcast(b, root=world - 1).wait()
            np.testing.assert_array_equal(b, vals(n, world - 1, dtype), err_msg=f"broadcast {tag}")

            per = n // world * world
            send = vals(per, rank, dtype)
            recv = np.zeros(per, dtype)
            comm.alltoall(send, recv).wait()
            blk = per // world
            for r in range(world):
                np.testing.assert_array_equal(recv[r * blk:(r + 1) * blk],
                                              vals(per, r, dtype)[rank * blk:(rank + 1) * blk],
                                              err_msg=f"alltoall {tag}")
    comm.barrier().wait()


def dlpack(comm):
    import torch
    t = torch.full((100,), 1.5, dtype=torch.bfloat16)
    comm.allreduce(t).wait()
    assert torch.equal(t, torch.full((100,), 1.5 * comm.size, dtype=torch.bfloat16)), t[:4]


def errors(comm):
    rank = comm.rank
    for fn, what in [(lambda: comm.allreduce(np.zeros(3, np.uint16)), "uint16"),
                     (lambda: comm.allreduce(np.zeros(4, np.float32), np.zeros(3, np.float32)), "size"),
                     (lambda: comm.allreduce(np.zeros(4, np.float32), np.zeros(4, np.float64)), "dtype"),
                     (lambda: comm.allreduce(np.zeros(8, np.float32)[::2]), "strided"),
                     (lambda: comm.allreduce(np.zeros(4, np.float32), op="xor"), "op"),
                     (lambda: comm.broadcast(np.zeros(4, np.float32), root=comm.size), "root"),
                     (lambda: comm.allreduce(42), "not a buffer")]:
        try:
            fn()
        except gradwire.InvalidArgumentError as e:
            assert isinstance(e, ValueError) and e.code == "InvalidArgument", (what, e)
            assert str(e).startswith("gradwire InvalidArgument: "), str(e)
        else:
            raise AssertionError(f"rank {rank}: {what}: no InvalidArgumentError")
    ro = np.zeros(4, np.float32)
    ro.setflags(write=False)
    try:
        comm.allreduce(ro)
        raise AssertionError("read-only buffer accepted")
    except gradwire.InvalidArgumentError as e:
        assert "read-only" in e.message, e.message


def interrupt(comm):
    """Rank 0 waits for rank 1, who joins 1.5 s late."""
    a = np.ones(1000, np.float32)
    if comm.rank == 0:
        w = comm.allreduce(a)
        assert not w.test()
        try:
            w.wait(timeout=0.2)
            raise AssertionError("wait(timeout) returned early")
        except gradwire.TimeoutError as e:
            assert e.code == "Timeout" and isinstance(e, TimeoutError), e
        main_ident = threading.main_thread().ident
        threading.Timer(0.2, lambda: signal.pthread_kill(main_ident, signal.SIGINT)).start()
        start = time.monotonic()
        try:
            w.wait()
            raise AssertionError("wait returned although rank 1 had not joined")
        except KeyboardInterrupt:
            assert time.monotonic() - start < 1.0
        del a  # the Work keeps the buffer alive until the collective completes
        w.wait()
    else:
        time.sleep(1.5)
        comm.allreduce(a).wait()
        np.testing.assert_array_equal(a, np.full(1000, comm.size, np.float32))


def shared(comm):
    """allocate_shared: numpy views of shared memory take the direct path
    (same results as ordinary arrays, every dtype and size)."""
    rank, world = comm.rank, comm.size
    for dtype in DTYPES:
        for n in SIZES:
            tag = f"shared {np.dtype(dtype).name} n={n}"
            itemsize = np.dtype(dtype).itemsize
            buf = comm.allocate_shared(n * itemsize)
            assert buf.direct == (world > 1), (buf.direct, world)
            assert len(buf) == n * itemsize
            a = np.frombuffer(buf, dtype=dtype, count=n)
            a[:] = vals(n, rank, dtype)
            comm.allreduce(a).wait()
            total = sum(vals(n, r, np.int64) for r in range(world)) if n else np.zeros(0, np.int64)
            np.testing.assert_array_equal(a, total.astype(dtype), err_msg=f"allreduce {tag}")
            src_buf = comm.allocate_shared(n * itemsize)
            src = np.frombuffer(src_buf, dtype=dtype, count=n)
            src[:] = vals(n, rank, dtype)
            cnt = gradwire.shard_count(n, world, rank)
            off = gradwire.shard_offset(n, world, rank)
            shard = np.zeros(cnt, dtype)
            comm.reduce_scatter(src, shard).wait()
            np.testing.assert_array_equal(shard, total[off:off + cnt].astype(dtype),
                                          err_msg=f"reduce_scatter {tag}")
            full = np.zeros(n, dtype)
            comm.allgather(src[off:off + cnt], full).wait()
            want = np.zeros(n, dtype)
            for r in range(world):
                o, c = gradwire.shard_offset(n, world, r), gradwire.shard_count(n, world, r)
                want[o:o + c] = vals(n, r, dtype)[o:o + c]
            np.testing.assert_array_equal(full, want, err_msg=f"allgather {tag}")
            del a, src


def main():
    comm = gradwire.Communicator.create()
    rank, world = comm.rank, comm.size
    assert comm.provider, comm.provider
    collectives(comm)
    dlpack(comm)
    errors(comm)
    shared(comm)
    # split: [last, 0] (reversed rank order; one rank at world 1)
    members = sorted({world - 1, 0}, reverse=True)
    sub = comm.split(members)
    if rank in members:
        assert sub is not None and sub.size == len(members) and sub.rank == members.index(rank)
        collectives(sub)
    else:
        assert sub is None
    if world >= 2:
        interrupt(comm)
    comm.barrier().wait()
    print(f"rank {rank}: direct_worker OK (world {world}, {comm.provider})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
