"""torch DDP on backend "gradwire" with torch.optim.Adam to gradwire's
ShardedDataParallel and back through sharded checkpoints (issue 43): DDP at
2 ranks -> stage 2 at 3 ranks -> DDP at 3, each continuing within the
worker's stated tolerance of one uninterrupted run; a checkpoint of Adam's
state loaded into SGD is an InvalidArgumentError on every rank."""
from conftest import launch, requires_torch

pytestmark = requires_torch


def test_ddp_to_sharded_and_back(tmp_path):
    # The save under mpirun, whose launcher does not import torch (torchrun's
    # agent does); the continuation under torchrun.
    launch("mpirun", 2, "ddp_checkpoint_worker.py", "ddp_save", tmp_path, ok="ddp save OK")
    out = launch("torchrun", 3, "ddp_checkpoint_worker.py", "continue", tmp_path,
                 ok="ddp continue OK")
    print(out)
