"""torch.distributed with backend="gradwire" against gloo, under torchrun and mpirun."""
import os

import pytest

from conftest import LAUNCHERS, WORLDS, launch, requires_torch

pytestmark = requires_torch


# One launch per world: the collectives against gloo at every size, then in
# the same process group the list outputs under inference_mode and no_grad
# (modes_worker.py) at 2 and 3 under torchrun, and last the errors and
# interruption (errors_worker.py) at 2 under torchrun and 3 under mpirun.
# Each check prints its own OK line; launch() requires each from every rank.
EXTRA = {("torchrun", 2): ["modes", "errors"], ("torchrun", 3): ["modes"],
         ("mpirun", 3): ["errors"]}
OK_OF = {"modes": "modes OK", "errors": "errors_worker OK"}


@pytest.mark.parametrize("launcher,nproc", WORLDS)
def test_collectives_modes_errors_match_gloo(launcher, nproc):
    extra = EXTRA.get((launcher, nproc), [])
    launch(launcher, nproc, "collectives_worker.py", *extra,
           ok=["collectives_worker OK"] + [OK_OF[e] for e in extra])


def test_registered_backend():
    import torch.distributed as dist
    import gradwire.torch  # noqa: F401
    assert "gradwire" in dist.Backend.backend_list


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_failing_rank_ends_the_job(launcher):
    import subprocess
    import time
    from conftest import HERE, command
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    start = time.monotonic()
    proc = subprocess.run(command(launcher, 3, os.path.join(HERE, "failing_worker.py"), []),
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)
    took = time.monotonic() - start
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "failing on purpose" in proc.stdout, proc.stdout[-3000:]
    assert "returned without the last rank" not in proc.stdout, proc.stdout[-3000:]
    assert took < 60, f"{launcher}: the job took {took:.0f} s to end after a rank failed"


def _cuda_devices():
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


@pytest.mark.parametrize("path,nproc", [("nccl", 1), ("nccl", 2), ("staged", 1), ("staged", 3)])
def test_cuda_tensors(path, nproc, monkeypatch):
    """CUDA tensors: NCCL needs a GPU per rank; the staged path lets ranks share one."""
    devices = _cuda_devices()
    if devices == 0:
        pytest.skip("no CUDA device (torch.cuda.is_available() is false)")
    if path == "nccl" and nproc > devices:
        pytest.skip(f"{nproc} ranks on the NCCL path need {nproc} GPUs; this machine has {devices}")
    monkeypatch.setenv("GRADWIRE_DEVICE_PATH", path)
    launch("torchrun", nproc, "cuda_worker.py")
