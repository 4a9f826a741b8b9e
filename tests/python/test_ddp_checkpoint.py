"""torch DDP on backend "gradwire" with torch.optim.Adam to gradwire's
ShardedDataParallel and back through sharded checkpoints (issue 43): DDP at
2 ranks -> stage 2 at 3 ranks -> DDP at 2, each continuing within the
worker's stated tolerance of one uninterrupted run; a checkpoint of Adam's
state loaded into SGD is an InvalidArgumentError on every rank."""
from conftest import launch, requires_torch

pytestmark = requires_torch


def test_ddp_to_sharded_and_back(tmp_path):
    launch("torchrun", 2, "ddp_checkpoint_worker.py", "ddp_save", tmp_path, ok="ddp save OK")
    launch("torchrun", 3, "ddp_checkpoint_worker.py", "sdp_continue", tmp_path,
           ok="sdp continue OK")
    launch("torchrun", 2, "ddp_checkpoint_worker.py", "ddp_continue", tmp_path,
           ok="ddp continue OK")
