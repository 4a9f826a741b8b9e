"""Launch helpers for gradwire's Python tests: run a worker script on N ranks
under torchrun or mpirun, and require every rank to print its OK line.

The extension is found through PYTHONPATH (ctest sets <build>/python)."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAUNCHERS = ["torchrun", "mpirun"]
# The worlds of the collective suites: every size, each launcher at 3, the
# non-power of two (gradwire reads mpirun's variables instead of
# torchrun's). The code below the launcher is the same at every size, and
# each launch costs a Python start (and torch's import) per rank, plus one
# for torchrun's agent: the world of one runs under mpirun, whose launcher
# does not import torch.
WORLDS = [("mpirun", 1), ("torchrun", 2), ("torchrun", 3), ("mpirun", 3)]


def have_torch():
    # Found, not imported: importing torch costs seconds of CPU in pytest's
    # own process, which most suites use only to launch workers (a module
    # that is there but fails to import fails the tests instead of skipping).
    try:
        return (importlib.util.find_spec("torch") is not None
                and importlib.util.find_spec("gradwire._C_torch") is not None)
    except ImportError:
        return False


def command(launcher, nproc, script, args):
    if launcher == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={nproc}", script, *args]
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not installed")
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(nproc),
            "-x", "PYTHONPATH", sys.executable, script, *args]


def launch(launcher, nproc, script, *args, timeout=600, ok="OK"):
    """Runs `script` on `nproc` ranks; returns the combined output. `ok` is
    the line every rank must print, or a list of them: one per scenario a
    launch runs in sequence (one process start for several scenarios), so a
    failure names the scenarios that did not finish."""
    env = dict(os.environ)
    # A launcher's variables from an outer job would confuse the inner one.
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
              "GRADWIRE_STORE_DIR", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    env.setdefault("OMP_NUM_THREADS", "1")
    path = script if os.path.isabs(script) else os.path.join(HERE, script)
    proc = subprocess.run(command(launcher, nproc, path, [str(a) for a in args]), env=env,
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    out = proc.stdout
    tail = "\n".join(out.splitlines()[-60:])
    # Ranks print concurrently: lines may interleave, so match anywhere.
    wanted = [ok] if isinstance(ok, str) else list(ok)
    missing = []
    for line in wanted:
        oks = set(re.findall(rf"rank (\d+): [^\n]*?{re.escape(line)}", out))
        if len(oks) != nproc:
            missing.append(f"'{line}' (from ranks {sorted(oks)})")
    what = f"{launcher} -n {nproc} {os.path.basename(script)} {' '.join(map(str, args))}"
    assert proc.returncode == 0 and not missing, (
        f"{what} failed (exit status {proc.returncode}); scenarios without an OK line on all "
        f"{nproc} ranks: {', '.join(missing) or 'none'}:\n{tail}")
    return out


requires_torch = pytest.mark.skipif(not have_torch(), reason="torch or gradwire._C_torch missing")
