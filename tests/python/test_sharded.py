"""gradwire's own sharded engine from Python (issue 43):
gradwire.torch.ShardedDataParallel at stages 1-3 against torch DDP on gloo
with torch.optim, sharded checkpoints re-sharded between world sizes, and
mismatched modules. The worker (sharded_worker.py) states the tolerances."""
import pytest

from conftest import WORLDS, launch, requires_torch

pytestmark = requires_torch


@pytest.mark.parametrize("launcher,nproc", WORLDS)
def test_stages_match_ddp_gloo(launcher, nproc):
    launch(launcher, nproc, "sharded_worker.py", "match", ok="sharded match OK")


# N -> M: stage 2 from 2 ranks to 3, stage 3 from 3 ranks to 2 and to 1.
@pytest.mark.parametrize("stage,saved,loaded", [(2, 2, [3]), (3, 3, [2, 1])])
def test_checkpoint_reshards(stage, saved, loaded, tmp_path):
    ckpt, ref = tmp_path / "ckpt", tmp_path / "final.pt"
    launch("torchrun", saved, "sharded_worker.py", "save", ckpt, ref, stage,
           ok="sharded save OK")
    for m in loaded:
        launch("torchrun", m, "sharded_worker.py", "load", ckpt, ref, stage,
               ok="sharded load OK")


@pytest.mark.parametrize("nproc", [2, 3])
def test_mismatched_modules_raise_everywhere(nproc):
    launch("torchrun", nproc, "sharded_worker.py", "mismatch", ok="sharded mismatch OK")


@pytest.mark.parametrize("nproc", [1, 3])
def test_int8_gradient_compression(nproc):
    launch("torchrun", nproc, "sharded_worker.py", "compressed", ok="sharded compressed OK")
