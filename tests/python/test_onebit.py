"""gradwire.torch.optim (1-bit Adam/LAMB over the C++ implementation) on
1-3 ranks under torchrun and mpirun (onebit_worker.py)."""
import glob

import pytest

from conftest import WORLDS, launch, requires_torch


@requires_torch
# Every world size under torchrun, mpirun at 3 (see test_torch_backend.py).
@pytest.mark.parametrize("launcher,nproc", WORLDS)
def test_onebit_optimizers(launcher, nproc):
    launch(launcher, nproc, "onebit_worker.py")


def _cuda():
    # No NVIDIA device node: no CUDA, without importing torch (seconds of CPU).
    if not glob.glob("/dev/nvidia*"):
        return False
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


@requires_torch
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
@pytest.mark.parametrize("nproc", [1, 2])
def test_onebit_cuda(nproc, monkeypatch):
    # Ranks share the GPU on the staged path (NCCL needs one GPU per rank).
    monkeypatch.setenv("GRADWIRE_DEVICE_PATH", "staged")
    launch("torchrun", nproc, "onebit_cuda_worker.py")
