"""gradwire.torch.optim (1-bit Adam/LAMB over the C++ implementation) on
1-3 ranks under torchrun and mpirun (onebit_worker.py)."""
import pytest

from conftest import LAUNCHERS, launch, requires_torch


@requires_torch
@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("nproc", [1, 2, 3])
def test_onebit_optimizers(launcher, nproc):
    launch(launcher, nproc, "onebit_worker.py")
