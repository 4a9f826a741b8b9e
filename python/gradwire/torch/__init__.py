"""gradwire as a torch.distributed backend.

    import gradwire.torch                      # registers backend "gradwire"
    torch.distributed.init_process_group(backend="gradwire")

Works under torchrun, under mpirun (RANK/WORLD_SIZE/LOCAL_RANK are taken
from Open MPI's variables and, when MASTER_ADDR/MASTER_PORT are unset, rank 0
picks them and shares them over MPI) and under srun (taken from Slurm's
variables as gradwire reads them: README "Launching under Slurm"). Every process group, ``new_group``
included, gets its own gradwire Communicator of exactly the group's ranks,
bootstrapped through the group's torch store. CPU and CUDA tensors: CUDA
ones go through the Communicator's device path (NCCL, or staged through
host memory: ``GRADWIRE_DEVICE_PATH``), after PyTorch's current stream.

The backend itself is the libtorch adapter's ``gradwire::torch::Backend``
(``gradwire/torch/process_group.h``, in libgradwire_torch), which C++
programs use without Python; this package only registers it.

DDP comm hooks running gradwire's kernels: ``gradwire.torch.hooks``. gradwire's
own sharded engine (ZeRO stages 1-3): ``gradwire.torch.ShardedDataParallel``
with the optimizers of ``gradwire.torch.sharded``.
"""
import atexit
import os

import torch
import torch.distributed as dist

import gradwire  # noqa: F401 - registers the gradwire.Error classes first
from gradwire import _C
from gradwire import _C_torch

from . import hooks  # noqa: F401
from . import sharded  # noqa: F401
from .sharded import ShardedDataParallel  # noqa: F401

BACKEND = "gradwire"


def _fill_env_from_mpirun():
    """torch's env:// rendezvous wants the torchrun names; mpirun sets others."""
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" not in env:
        return
    env.setdefault("RANK", env["OMPI_COMM_WORLD_RANK"])
    env.setdefault("WORLD_SIZE", env["OMPI_COMM_WORLD_SIZE"])
    env.setdefault("LOCAL_RANK", env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    env.setdefault("LOCAL_WORLD_SIZE", env.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    if "MASTER_PORT" not in env:
        single_host = env.get("OMPI_COMM_WORLD_LOCAL_SIZE") == env["OMPI_COMM_WORLD_SIZE"]
        addr, port = _C_torch._mpi_rendezvous(env.get("MASTER_ADDR", ""), single_host)
        env.setdefault("MASTER_ADDR", addr)
        env["MASTER_PORT"] = str(port)


# "Slurm job J step S" once _fill_env_from_slurm() filled torch's variables.
_slurm_job = None


def _fill_env_from_slurm():
    """Under srun, torch's env:// rendezvous wants the torchrun names; fill
    them from Slurm's (README "Launching under Slurm") unless mpirun or a
    launcher already set them. torch's own store takes the odd port above
    gradwire's (Note [Slurm store port] in src/bootstrap/slurm.cpp), and
    GRADWIRE_STORE_PORT keeps gradwire.Communicator.create() in this process
    on gradwire's, so the two stores never meet on one port."""
    global _slurm_job
    env = os.environ
    launched = ("OMPI_COMM_WORLD_SIZE", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    if any(v in env for v in launched):
        return
    found = _C._slurm_rendezvous()
    if found is None:
        return
    rank, size, local_rank, host, port, job = found
    env["RANK"] = str(rank)
    env["WORLD_SIZE"] = str(size)
    if local_rank >= 0:
        env.setdefault("LOCAL_RANK", str(local_rank))
    env["MASTER_ADDR"] = host
    env["MASTER_PORT"] = str(port + 1)
    env.setdefault("GRADWIRE_STORE_PORT", str(port))
    _slurm_job = job


def _check_same_job(store, rank, size):
    """Note [same job] (src/bootstrap/slurm.cpp) over the group's torch
    store: a rank of another Slurm step that reached this job's torch store
    (their ports met) stops before writing to it; ranks that count another
    size stop on both sides."""
    mine = f"{size}\n{_slurm_job}"
    if rank != 0:
        size0, _, job0 = store.get("gradwire_job/0").decode().partition("\n")
        if job0 != _slurm_job:
            raise gradwire.InvalidArgumentError(
                f"rank {rank} of {_slurm_job} reached the torch store at "
                f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} of another "
                f"job: rank 0 there is of {job0}; set MASTER_PORT to a port of this step's "
                f"own")
        store.set(f"gradwire_job/{rank}", mine)
        if size0 != str(size):
            raise gradwire.InvalidArgumentError(
                f"rank {rank} counts {size} ranks in {_slurm_job} but rank 0 counts {size0}")
        return
    store.set("gradwire_job/0", mine)
    for r in range(1, size):
        theirs = store.get(f"gradwire_job/{r}").decode()
        if theirs != mine:
            size_r, _, job_r = theirs.partition("\n")
            raise gradwire.InvalidArgumentError(
                f"rank {r} counts {size_r} ranks in {job_r} but rank 0 counts {size} in "
                f"{_slurm_job}")


def _create(store, rank, size, timeout):
    if _slurm_job is not None:
        _check_same_job(store, rank, size)
    return _C_torch.create_backend(store, rank, size, timeout)


if BACKEND not in dist.Backend.backend_list:
    # One backend for both devices (Note [CUDA tensors in the backend] in
    # src/torch/c10d_work.cpp).
    dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
_fill_env_from_mpirun()
_fill_env_from_slurm()
# Note [communicators at exit] (src/torch/c10d_backend.cpp): close the
# communicators of groups still alive while the interpreter is whole.
atexit.register(_C_torch._shutdown_all)
