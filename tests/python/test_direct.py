"""The direct API (gradwire.Communicator) on numpy arrays and DLPack tensors."""
import os

import numpy as np
import pytest

import gradwire
from conftest import WORLDS, launch


@pytest.fixture(scope="module")
def world_of_one():
    for k in ("OMPI_COMM_WORLD_SIZE", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "GRADWIRE_STORE_DIR"):
        assert k not in os.environ, f"{k} is set: run this test outside a launcher"
    return gradwire.Communicator.create(timeout=30)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64,
                                   np.uint8])
def test_world_of_one(world_of_one, dtype):
    c = world_of_one
    assert (c.rank, c.size) == (0, 1)
    a = np.arange(10).astype(dtype)
    w = c.allreduce(a, op="max")
    w.wait(timeout=10)
    assert w.test()
    np.testing.assert_array_equal(a, np.arange(10).astype(dtype))
    out = np.zeros(10, dtype)
    c.allgather(a, out).wait()
    np.testing.assert_array_equal(out, a)
    empty = np.zeros(0, dtype)
    c.allreduce(empty).wait()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0.0, 1e300])
def test_create_refuses_timeouts_that_cannot_work(bad):
    # Issue 17, item 5: nan used to become "-9223372036854775808 ms".
    with pytest.raises(gradwire.InvalidArgumentError, match="timeout must be a number of seconds"):
        gradwire.Communicator.create(timeout=bad)


@pytest.mark.parametrize("bad", [float("nan"), -1.0, float("-inf")])
def test_wait_refuses_timeouts_that_cannot_work(world_of_one, bad):
    w = world_of_one.allreduce(np.ones(4, np.float32))
    with pytest.raises(gradwire.InvalidArgumentError, match="Work.wait: timeout must be"):
        w.wait(timeout=bad)
    w.wait(timeout=0 if w.test() else 10)


def test_dlpack_zero_copy(world_of_one):
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    before = t.data_ptr()
    world_of_one.allreduce(t, op="sum").wait()
    assert t.data_ptr() == before and torch.equal(t, torch.arange(6, dtype=torch.bfloat16).reshape(2, 3))
    with pytest.raises(gradwire.InvalidArgumentError, match="not contiguous"):
        world_of_one.allreduce(torch.ones(4, 4).t())


def test_error_classes(world_of_one):
    assert issubclass(gradwire.TimeoutError, gradwire.Error)
    assert issubclass(gradwire.TimeoutError, TimeoutError)
    assert issubclass(gradwire.InvalidArgumentError, ValueError)
    assert issubclass(gradwire.Error, RuntimeError)
    assert issubclass(gradwire.UnauthenticatedError, PermissionError)
    for name in ("InvalidArgument", "Timeout", "PeerLost", "Mismatch", "Transport", "Internal",
                 "Aborted", "Protocol", "Unauthenticated"):
        assert getattr(gradwire, name + "Error").code == name
    with pytest.raises(gradwire.InvalidArgumentError) as info:
        world_of_one.allreduce(np.zeros(3, np.complex64))
    assert info.value.code == "InvalidArgument"
    assert str(info.value) == "gradwire InvalidArgument: " + info.value.message
    assert "rank 0: allreduce" in info.value.message


# Every world size under torchrun, mpirun at 3 (see test_torch_backend.py).
@pytest.mark.parametrize("launcher,nproc", WORLDS)
def test_ranks(launcher, nproc):
    launch(launcher, nproc, "direct_worker.py")
