"""One task of `srun -n N python3 torch_worker.py` (tests/slurm): the torch
backend from Slurm's variables alone (gradwire.torch fills torch's), and
gradwire's own Communicator beside it in the same process, its store on the
even port and torch's on the odd one above (Note [Slurm store port])."""
import os
import sys

try:
    import torch
    import torch.distributed as dist

    import gradwire
    import gradwire.torch  # noqa: F401 - registers backend "gradwire", fills torch's variables
except ImportError as e:
    print(f"SKIP: the torch backend is not built ({e})")
    sys.exit(77)

rank = int(os.environ["SLURM_PROCID"])
size = int(os.environ["SLURM_STEP_NUM_TASKS"])
assert os.environ["RANK"] == str(rank) and os.environ["WORLD_SIZE"] == str(size), os.environ
torch_port, store_port = int(os.environ["MASTER_PORT"]), int(os.environ["GRADWIRE_STORE_PORT"])
assert torch_port == store_port + 1 and store_port % 2 == 0, (torch_port, store_port)

dist.init_process_group(backend="gradwire")
assert (dist.get_rank(), dist.get_world_size()) == (rank, size)
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert torch.all(t == size * (size + 1) / 2), t[:4]
gathered = [torch.zeros(3) for _ in range(size)]
dist.all_gather(gathered, torch.full((3,), float(rank)))
assert [int(g[0]) for g in gathered] == list(range(size))

comm = gradwire.Communicator.create()
assert (comm.rank, comm.size) == (rank, size)
u = torch.ones(4096)
comm.allreduce(u, op="sum").wait(timeout=60)
assert torch.all(u == size), u[:4]

dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} of {size}: torch backend and Communicator under srun passed")
