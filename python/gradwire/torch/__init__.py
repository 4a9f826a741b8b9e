"""gradwire as a torch.distributed backend.

    import gradwire.torch                      # registers backend "gradwire"
    torch.distributed.init_process_group(backend="gradwire")

Works under torchrun and under mpirun (RANK/WORLD_SIZE/LOCAL_RANK are taken
from Open MPI's variables and, when MASTER_ADDR/MASTER_PORT are unset, rank 0
picks them and shares them over MPI). Every process group, ``new_group``
included, gets its own gradwire Communicator of exactly the group's ranks,
bootstrapped through the group's torch store. CPU and CUDA tensors: CUDA
ones go through the Communicator's device path (NCCL, or staged through
host memory: ``GRADWIRE_DEVICE_PATH``), after PyTorch's current stream.

The backend itself is the libtorch adapter's ``gradwire::torch::Backend``
(``gradwire/torch/process_group.h``, in libgradwire_torch), which C++
programs use without Python; this package only registers it.

DDP comm hooks running gradwire's kernels: ``gradwire.torch.hooks``.
"""
import atexit
import os

import torch
import torch.distributed as dist

import gradwire  # noqa: F401 - registers the gradwire.Error classes first
from gradwire import _C
from gradwire import _C_torch

from . import hooks  # noqa: F401

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


def _create(store, rank, size, timeout):
    return _C_torch.create_backend(store, rank, size, timeout)


if BACKEND not in dist.Backend.backend_list:
    # One backend for both devices (Note [CUDA tensors in the backend] in
    # src/torch/c10d_work.cpp).
    dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
_fill_env_from_mpirun()
# Note [communicators at exit] (src/torch/c10d_backend.cpp): close the
# communicators of groups still alive while the interpreter is whole.
atexit.register(_C_torch._shutdown_all)
