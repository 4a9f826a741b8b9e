"""SIGTERM ends a rank of the gradwire torch backend promptly with the
default status (killed by SIGTERM, 143 to a shell): idle, inside a
collective and while exiting, ROUNDS times each (Note [foreign signal
handlers] in src/base/signals.h). The C++ twin is tests/ranks/sigterm_test.

One interpreter imports torch and gradwire once, then forks the two ranks of
each round (a fork server: 150 rounds of `import torch` would take minutes);
a child returns from main() and so exits like any script, through the
interpreter's finalisation and the atexit handlers. Rank 1 announces the
moment on a pipe, the driver SIGTERMs it, then rank 0; each must die of
SIGTERM within 10 s. Before the fix, PSM's C handler (installed when
libgradwire loaded libfabric) made them exit(1), and some hung for ever.

  python3 sigterm_driver.py [ROUNDS]   (prints "sigterm OK" on success)
"""
import atexit
import datetime
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import gradwire.torch  # noqa: F401 - registers backend "gradwire"

SCENARIOS = {"idle": "ready", "collective": "in-collective", "exiting": "exiting"}


def child(rank, scenario, store_dir, out):
    def say(what):
        os.write(out, (what + "\n").encode())

    store = dist.FileStore(os.path.join(store_dir, "store"), 2)
    dist.init_process_group("gradwire", store=store, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.ones(1024)
    dist.all_reduce(t)
    say("ready")
    if scenario == "idle" or rank == 0:
        while True:
            time.sleep(3600)
    if scenario == "collective":
        work = dist.all_reduce(t, async_op=True)
        say("in-collective")
        work.wait()
        say("the allreduce rank 0 never joined completed")
        return 3

    def slow_exit():  # runs first of the atexit handlers (registered last)
        say("exiting")
        time.sleep(0.3)
    atexit.register(slow_exit)
    return 0


def read_line(fd, buf, timeout=60.0):
    end = time.monotonic() + timeout
    while b"\n" not in buf[0]:
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 256)
        if not chunk:
            return None
        buf[0] += chunk
    line, buf[0] = buf[0].split(b"\n", 1)
    return line.decode()


def reap(pid, limit=10.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def describe(status):
    if status is None:
        return "still running 10 s after SIGTERM (hung; killed)"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.WEXITSTATUS(status)}"


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    rng = random.Random(12345)
    failures = []
    for scenario, moment in SCENARIOS.items():
        for rnd in range(rounds):
            store_dir = tempfile.mkdtemp(prefix="gw_sigterm_py_")
            kids = []
            for rank in (0, 1):
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(r)
                    return child(rank, scenario, store_dir, w)
                os.close(w)
                kids.append((pid, r, [b""]))
            what = f"{scenario} round {rnd}"
            for rank, (pid, fd, buf) in enumerate(kids):
                line = read_line(fd, buf)
                if line != "ready":
                    failures.append(f"{what}: rank {rank} said {line!r}, not 'ready'")
            if moment != "ready":
                line = read_line(kids[1][1], kids[1][2])
                if line != moment:
                    failures.append(f"{what}: rank 1 said {line!r}, not {moment!r}")
            time.sleep(rng.random() * 0.02)
            statuses = []
            for pid, fd, _ in reversed(kids):  # rank 1 first
                os.kill(pid, signal.SIGTERM)
                statuses.append(reap(pid))
                os.close(fd)
            shutil.rmtree(store_dir, ignore_errors=True)
            for pid, _, _ in kids:  # a killed rank cannot unlink its shm region
                for name in os.listdir("/dev/shm"):
                    if name.startswith(f"gw_{pid}_"):
                        os.unlink(os.path.join("/dev/shm", name))
            for rank, status in zip((1, 0), statuses):
                if status is None or not os.WIFSIGNALED(status) or \
                        os.WTERMSIG(status) != signal.SIGTERM:
                    failures.append(f"{what}: rank {rank} {describe(status)}; expected to be "
                                    "killed by SIGTERM (status 143)")
            if failures:
                break
    if failures:
        print("\n".join(failures[:10]), flush=True)
        return 1
    print(f"sigterm OK ({rounds} rounds of {', '.join(SCENARIOS)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
