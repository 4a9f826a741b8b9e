"""DDP training with backend="gradwire" matches gloo; gradwire's comm hooks
match torch's; the example script runs with both backends."""
import os

import pytest

from conftest import ROOT, launch, requires_torch

pytestmark = requires_torch


# One launch per world runs, in one process group, DDP against gloo without
# a hook and with a 16-bit compress hook, then the PowerSGD hook's checks
# (powersgd_worker.py): each at 2 and 3 ranks and under both launchers
# (a Python start with torch costs seconds of CPU, more than a check).
@pytest.mark.parametrize("launcher,nproc,hook", [("torchrun", 3, "fp16"), ("mpirun", 2, "bf16")])
def test_ddp_hooks_powersgd_match_gloo(launcher, nproc, hook):
    launch(launcher, nproc, "ddp_worker.py", "--hook", "none", hook, "--powersgd",
           ok=["ddp_worker hook none OK", f"ddp_worker hook {hook} OK", "powersgd_worker OK"])


# Under torchrun, the launcher the example's README command uses; the
# cases above run DDP under mpirun too.
def test_example_train_ddp():
    script = os.path.join(ROOT, "examples", "train_ddp.py")
    for backend in ("gradwire", "gloo"):
        launch("torchrun", 2, script, "--backend", backend, "--steps", "5", "--hook", "fp16",
               ok="train_ddp done")

