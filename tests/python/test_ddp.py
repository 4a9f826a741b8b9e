"""DDP training with backend="gradwire" matches gloo; gradwire's comm hooks
match torch's; the example script runs with both backends."""
import os

import pytest

from conftest import ROOT, launch, requires_torch

pytestmark = requires_torch


@pytest.mark.parametrize("launcher,nproc,hook", [
    ("torchrun", 2, "none"), ("mpirun", 3, "none"),
    ("torchrun", 3, "fp16"), ("mpirun", 2, "bf16"),
])
def test_ddp_matches_gloo(launcher, nproc, hook):
    launch(launcher, nproc, "ddp_worker.py", "--hook", hook)


# Under torchrun, the launcher the example's README command uses; the
# cases above run DDP under mpirun too.
def test_example_train_ddp():
    script = os.path.join(ROOT, "examples", "train_ddp.py")
    for backend in ("gradwire", "gloo"):
        launch("torchrun", 2, script, "--backend", backend, "--steps", "5", "--hook", "fp16",
               ok="train_ddp done")


@pytest.mark.parametrize("launcher,nproc", [("torchrun", 2), ("mpirun", 3)])
def test_powersgd_hook(launcher, nproc):
    launch(launcher, nproc, "powersgd_worker.py")
