#!/usr/bin/env python3
# Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
"""PyTorch's own distributed test suite against a backend (issue 21).

Runs torch.testing._internal.distributed.distributed_test's DistributedTest
(the spawn variant, as test/distributed/test_distributed_spawn.py does) with
BACKEND=gradwire (default) or gloo, at WORLD_SIZE ranks, CPU tests only.

  python3 tests/torch_suite/distributed_suite.py [--backend gloo] [--world-size 3] \
      [unittest args, e.g. -k test_send_recv]

Each spawned rank imports this file first, so `import gradwire.torch`
registers the backend there too.
"""
import argparse
import os
import sys
import tempfile

if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--backend", default=os.environ.get("BACKEND", "gradwire"))
    parser.add_argument("--world-size", default=os.environ.get("WORLD_SIZE", "2"))
    known, rest = parser.parse_known_args()
    os.environ["BACKEND"] = known.backend
    os.environ["WORLD_SIZE"] = str(known.world_size)
    sys.argv = [sys.argv[0]] + rest
os.environ.setdefault("BACKEND", "gradwire")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="gw_suite_"))
# CPU only: the suite's CUDA tests need a GPU per rank.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

if os.environ["BACKEND"] == "gradwire":
    import gradwire.torch  # noqa: F401  registers backend="gradwire"

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
