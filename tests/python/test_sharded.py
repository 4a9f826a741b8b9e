"""gradwire's own sharded engine from Python (issue 43):
gradwire.torch.ShardedDataParallel at stages 1-3 against torch DDP on gloo
with torch.optim, sharded checkpoints re-sharded between world sizes, int8
gradient compression, mismatched modules, and float16 loss scaling,
clipping and unused parameters ("features"). The worker (sharded_worker.py)
states the tolerances.

Each launch runs several of the worker's modes in one process group (a
Python start with torch costs seconds of CPU, more than most modes); each
mode prints its own OK line, which launch() requires from every rank. What
runs where (the checkpoint modes chain the launches, so one test):

  torchrun 3   match, save stage 3, compressed, mismatch, features
  torchrun 2   match, load stage 3 (3 -> 2), save stage 2, mismatch, reshard
  mpirun 1     match, load stage 3 (3 -> 1), compressed
  mpirun 3     match, load stage 2 (2 -> 3)
  mpirun 4     features, mismatch (the only world of 4: kept short)

match at every size, under both launchers; N -> M: stage 2 from 2 ranks to
3, stage 3 from 3 ranks to 2 and to 1; int8 at 1 and 3; mismatch at 2 and 3.
A world of one runs under mpirun: its launcher does not import torch, and
torchrun is tested at 2 and 3."""
from conftest import launch, requires_torch

pytestmark = requires_torch


def test_sharded_engine(tmp_path):
    s3, ref3 = tmp_path / "ckpt3", tmp_path / "final3.pt"
    s2, ref2 = tmp_path / "ckpt2", tmp_path / "final2.pt"
    launch("torchrun", 3, "sharded_worker.py", "match", "+", "save", s3, ref3, 3,
           "+", "compressed", "+", "mismatch", "+", "features",
           ok=["sharded match OK", "sharded save OK", "sharded compressed OK",
               "sharded mismatch OK", "sharded features OK"])
    launch("torchrun", 2, "sharded_worker.py", "match", "+", "load", s3, ref3, 3,
           "+", "save", s2, ref2, 2, "+", "mismatch", "+", "reshard",
           ok=["sharded match OK", "sharded load OK", "sharded save OK", "sharded mismatch OK",
               "sharded reshard OK"])
    launch("mpirun", 1, "sharded_worker.py", "match", "+", "load", s3, ref3, 3,
           "+", "compressed",
           ok=["sharded match OK", "sharded load OK", "sharded compressed OK"])
    launch("mpirun", 3, "sharded_worker.py", "match", "+", "load", s2, ref2, 2,
           ok=["sharded match OK", "sharded load OK"])
    launch("mpirun", 4, "sharded_worker.py", "features", "+", "mismatch",
           ok=["sharded features OK", "sharded mismatch OK"])
