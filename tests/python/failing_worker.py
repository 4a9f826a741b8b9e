"""One rank fails between collectives (test_torch_backend.py): the job must
end within seconds, not wait for the others' collective deadline -- under
mpirun the failing rank must not block in MPI_Finalize at exit waiting for
ranks that wait for it (Note [MPI_Finalize at exit] in
src/bootstrap/mpi_bootstrap.cpp)."""
import sys

import torch
import torch.distributed as dist

import gradwire.torch  # noqa: F401

dist.init_process_group(backend="gradwire")
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
if rank == dist.get_world_size() - 1:
    print(f"rank {rank}: failing on purpose", flush=True)
    sys.exit(3)
gathered = [torch.empty(8) for _ in range(dist.get_world_size())]
dist.all_gather(gathered, torch.ones(8))  # never completes: the last rank is gone
print(f"rank {rank}: all_gather returned without the last rank", flush=True)
