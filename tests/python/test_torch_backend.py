"""torch.distributed with backend="gradwire" against gloo, under torchrun and mpirun."""
import pytest

from conftest import LAUNCHERS, launch, requires_torch

pytestmark = requires_torch


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("nproc", [1, 2, 3])
def test_collectives_match_gloo(launcher, nproc):
    launch(launcher, nproc, "collectives_worker.py")


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_errors_and_interrupt(launcher):
    launch(launcher, 2, "errors_worker.py")


def test_registered_backend():
    import torch.distributed as dist
    import gradwire.torch  # noqa: F401
    assert "gradwire" in dist.Backend.backend_list
