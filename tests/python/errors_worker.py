"""Errors and interruption through torch.distributed with backend="gradwire"
(2 ranks or more; run last by collectives_worker.py's launches in
test_torch_backend.py, or alone):
 * invalid input raises gradwire.InvalidArgumentError (code, message) on the
   calling rank, before anything is sent;
 * Ctrl-C (SIGINT) interrupts a collective's wait with KeyboardInterrupt; the
   collective completes later once the peer joins, and the group stays usable;
 * a peer that never joins: gradwire.TimeoutError at the group's timeout;
 * after the atexit shutdown (Note [communicators at exit]) a collective on a
   group still alive raises gradwire.AbortedError instead of touching a
   closed communicator.
"""
import datetime
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import gradwire
import gradwire.torch  # noqa: F401


def expect(exc_type, code, fn, what):
    try:
        fn()
    except exc_type as e:
        assert isinstance(e, gradwire.Error), f"{what}: {type(e)} is not a gradwire.Error"
        assert e.code == code, f"{what}: code {e.code}, expected {code}"
        assert e.message and str(e).startswith(f"gradwire {code}: "), f"{what}: {e}"
        return e
    raise AssertionError(f"{what}: no {exc_type.__name__} raised")


def check(gloo):
    """Every check above on the default (gradwire) group; ends with the exit
    shutdown and destroys the process group, so it runs last."""
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world >= 2, world

    e = expect(gradwire.InvalidArgumentError, "InvalidArgument",
               lambda: dist.all_gather_into_tensor(torch.empty(3), torch.ones(5)),
               "wrong output size")
    assert f"rank {rank}" in e.message and "allgather_into_tensor" in e.message, e.message
    expect(ValueError, "InvalidArgument", lambda: dist.all_reduce(torch.ones(4, dtype=torch.uint16)),
           "uint16")
    expect(gradwire.Error, "InvalidArgument",
           lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND), "BAND")
    expect(gradwire.Error, "InvalidArgument", lambda: dist.all_reduce(torch.ones(8)[::2]),
           "non-contiguous")

    # Ctrl-C while rank 0 waits for the others, who join 1.5 s later.
    t = torch.ones(1000)
    if rank == 0:
        main_ident = threading.main_thread().ident
        threading.Timer(0.3, lambda: signal.pthread_kill(main_ident, signal.SIGINT)).start()
        start = time.monotonic()
        try:
            dist.all_reduce(t)
            raise AssertionError("all_reduce returned although the others had not joined")
        except KeyboardInterrupt:
            took = time.monotonic() - start
            assert took < 1.2, f"KeyboardInterrupt took {took:.2f} s"
    else:
        time.sleep(1.5)
        dist.all_reduce(t)
    dist.barrier()  # gradwire: ordered after the interrupted all_reduce
    assert torch.equal(t, torch.full((1000,), float(world))), t[:4]

    # A group with a 3 s deadline; the other ranks never join the all_reduce.
    short = dist.new_group(timeout=datetime.timedelta(seconds=3))
    if rank == 0:
        start = time.monotonic()
        e = expect(gradwire.TimeoutError, "Timeout",
                   lambda: dist.all_reduce(torch.ones(10), group=short), "peer never joins")
        took = time.monotonic() - start
        assert 2.5 < took < 12, f"Timeout after {took:.1f} s"
        assert "allreduce" in e.message, e.message
    dist.barrier(group=gloo)

    gradwire.torch._C_torch._shutdown_all()  # what atexit runs
    e = expect(gradwire.AbortedError, "Aborted", lambda: dist.all_reduce(torch.ones(3)),
               "collective after the exit shutdown")
    assert "exiting" in e.message, e.message
    print(f"rank {rank}: errors_worker OK", flush=True)
    dist.destroy_process_group()


def main():
    dist.init_process_group(backend="gradwire")
    check(dist.new_group(backend="gloo"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
