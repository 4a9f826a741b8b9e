"""SIGTERM ends a rank of the torch backend with the default status, idle,
in a collective and while exiting (sigterm_driver.py, GW_SIGTERM_ROUNDS rounds
each: 50 by default, 20 in ctest)."""
import os
import subprocess
import sys

from conftest import HERE, requires_torch

pytestmark = requires_torch


def test_sigterm_kills_with_the_default_status():
    env = dict(os.environ, OMP_NUM_THREADS="1", GRADWIRE_OFI_PROVIDER="shm",
               GRADWIRE_LOG_LEVEL="error")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
              "GRADWIRE_STORE_DIR", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    proc = subprocess.run([sys.executable, os.path.join(HERE, "sigterm_driver.py"),
                           os.environ.get("GW_SIGTERM_ROUNDS", "50")],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900)
    tail = "\n".join(proc.stdout.splitlines()[-40:])
    assert proc.returncode == 0 and "sigterm OK" in proc.stdout, tail
