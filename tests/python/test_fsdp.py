"""torch's sharded training on backend "gradwire" against gloo (issue 43):
the coalesced collectives, FSDP2 and DTensor.full_tensor(), DCP of sharded
and full state dicts, ZeroRedundancyOptimizer. One torchrun world per size
runs every check (fsdp_worker.py): 2 ranks under torchrun, 3 under mpirun
(whose launcher does not import torch; torchrun's agent does)."""
import pytest

from conftest import launch, requires_torch

pytestmark = requires_torch


@pytest.mark.parametrize("launcher,nproc", [("torchrun", 2), ("mpirun", 3)])
def test_fsdp_dcp_zero_match_gloo(launcher, nproc, tmp_path):
    launch(launcher, nproc, "fsdp_worker.py", tmp_path, ok="fsdp OK")
